"""What the summarizing steps share besides the processor: the summarizer from a setting, the plan of a cut, the
run's live request, and the check that a rewritten history is no less valid than the one it replaces."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest

from .._compaction import CompactionPlan, plan_compaction
from .._messages import user_prompts, validate_history
from .._sizes import ContextSize
from .._summary_run import SummaryOutcome, WarnOnce, summarize_with_fallback
from .._tokens import IncrementalCounter, TokenCounter, async_count_tokens, count_tokens_approximately
from .._working_set import WorkingSetOptions
from ..summarize import DeterministicSummarizer, LLMSummarizer, Summarizer, latest_user_request
from ..summarize._latest import latest_user_request_index
from ..summarize._models import RUN_MODEL
from ..summarize._protocol import LiveRequest
from ..summarize._template import DEFAULT_SUMMARY_PROMPT
from ._base import RunInfo

__all__ = ["keep_message_counter", "live_request", "make_summarizer", "new_problems", "plan_cut", "summarize_plan"]


def make_summarizer(model: Any, *, prompt_template: str | None = None, timeout: float | None = 120.0) -> Summarizer:
    """A summarizer from `RUN_MODEL` (the run's own model), a model name, a pydantic-ai `Model`, a `Summarizer`,
    or `None` (deterministic). A model name pydantic-ai cannot resolve raises `ValueError`."""
    if model is None:
        return DeterministicSummarizer()
    if isinstance(model, Summarizer):
        return model
    if model is RUN_MODEL or isinstance(model, str) or hasattr(model, "request"):
        return LLMSummarizer(model, prompt_template=prompt_template or DEFAULT_SUMMARY_PROMPT, timeout=timeout)
    raise TypeError(f"model must be a model name, a pydantic-ai Model, a Summarizer or None, got {model!r}")


def new_problems(before: Sequence[ModelMessage], after: Sequence[ModelMessage]) -> list[str]:
    """Problems in `after` that `before` did not already have (a processor must never add one): compared by kind
    and tool call id, so a second orphan is new even when the input already held one."""
    for_request = isinstance(after[-1], ModelRequest) if after else True
    problems = validate_history(after, for_request=for_request)
    if not problems:  # the usual case: the (long) input need not be validated at all
        return []
    old = Counter((p.kind, p.tool_call_id) for p in validate_history(before, for_request=for_request))
    added: list[str] = []
    for problem in problems:
        key = (problem.kind, problem.tool_call_id)
        if old[key] > 0:
            old[key] -= 1
        else:
            added.append(str(problem))
    return added


async def keep_message_counter(
    messages: Sequence[ModelMessage],
    keep: ContextSize,
    counter: TokenCounter,
    budget: int | None,
    *,
    from_start: bool = False,
) -> Callable[[ModelMessage], int] | None:
    """A per-message counter for token keeps. Cached counters are used as they are; any other (sync or async)
    counter is asked once per message, from the newest back (`from_start`: from the first on, for a kept head)
    until the keep is exceeded."""
    if keep[0] == "messages":
        return None
    if isinstance(counter, IncrementalCounter):
        return counter.count_message
    if counter is count_tokens_approximately:
        return None  # find_safe_cutoff's default
    limit = keep[1] if keep[0] == "tokens" else keep[1] * (budget or 0)
    counts: dict[int, int] = {}
    total = 0
    for message in messages if from_start else reversed(messages):
        counts[id(message)] = await async_count_tokens(counter, [message])
        total += counts[id(message)]
        if total > limit:
            break
    return lambda message: counts.get(id(message), 1 << 40)


async def plan_cut(
    messages: Sequence[ModelMessage],
    keep: ContextSize,
    keep_head: ContextSize,
    counter: TokenCounter,
    budget: int | None,
    working_set: WorkingSetOptions,
) -> CompactionPlan | None:
    """The plan of a processor's cut: the kept head and tail measured with its own token counter."""
    keep_counter = await keep_message_counter(messages, keep, counter, budget)
    head_counter = await keep_message_counter(messages, keep_head, counter, budget, from_start=True)
    return plan_compaction(
        messages,
        keep,
        keep_head=keep_head,
        max_tokens=budget,
        message_tokens=keep_counter,
        working_set=working_set,
        head_tokens=head_counter,
    )


def live_request(run: RunInfo | None, messages: Sequence[ModelMessage], tokens: int) -> LiveRequest | None:
    """The request a capability is preparing, as a summarizer using the run's model reuses it."""
    if run is None:
        return None
    request = run.request
    return LiveRequest(request.model, messages, request.model_settings, request.model_request_parameters, tokens)


async def summarize_plan(
    messages: Sequence[ModelMessage],
    plan: CompactionPlan,
    summarizer: Summarizer,
    *,
    focus: str | None,
    live: LiveRequest | None,
    budget: int | None,
    required_sections: Sequence[str],
    warning: WarnOnce,
) -> SummaryOutcome:
    """The summary of `plan`'s span of `messages` (asked of the summarizer, checked, else the deterministic one):
    the same call whether the compaction runs on the request path or in the background."""
    latest = latest_user_request_index(messages)
    return await summarize_with_fallback(
        plan,
        summarizer,
        focus=focus,
        latest_request=latest_user_request(messages),
        first_index=plan.head_end,
        live=live,
        window_tokens=budget,
        kept_messages=len(messages) - plan.cutoff,
        required_sections=required_sections,
        warning=warning,
        latest_request_kept=_kept_verbatim(messages, plan, latest),
    )


def _kept_verbatim(messages: Sequence[ModelMessage], plan: CompactionPlan, index: int | None) -> bool:
    """Whether the user's latest request (at `index`) stays verbatim in the working context after `plan`: outside
    the span, moved with the working set, or carried by the summary's request. Every plan keeps the latest request
    that holds a prompt; the user's own is another one when a tool delivered a document as user text after it."""
    if index is None or not plan.head_end <= index < plan.cutoff:
        return True
    kept = {id(p) for m in plan.preserved_messages for p in m.parts} | {id(p) for p in plan.carried}
    return all(id(p) in kept for p in user_prompts(messages, index))
