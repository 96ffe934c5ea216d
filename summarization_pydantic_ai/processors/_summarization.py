"""`SummarizationProcessor`: replace the old part of a history with a summary when a trigger fires."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest

from .._cache_policy import CachePolicy
from .._compaction import (
    NOT_SMALLER,
    CompactionPlan,
    WarnOnce,
    assemble,
    build_summary_message,
    completed_event,
    plan_compaction,
    shrinks,
    summarize_with_fallback,
)
from .._events import (
    CompactionSkipped,
    CompactionStarted,
    EventCallback,
    SummarizerFallback,
    emit_event,
)
from .._messages import validate_history
from .._pinning import WorkingSetSettings
from .._sizes import ContextSize, Measure, normalize_keep_head
from .._thinning import thin_outputs, thinning_event
from .._tokens import IncrementalCounter, TokenCounter, async_count_tokens, count_tokens_approximately
from .._working_set import WorkingSetOptions
from ..summarize import DeterministicSummarizer, LLMSummarizer, Summarizer, latest_user_request
from ..summarize._models import RUN_MODEL
from ..summarize._protocol import LiveRequest
from ..summarize._template import DEFAULT_SUMMARY_PROMPT, validate_template
from ..summarize._validate import DEFAULT_REQUIRED_SECTIONS, check_sections
from ._base import HistoryProcessor, RunInfo, measure, resolve_budget, validate_cut_settings

__all__ = ["SummarizationProcessor", "live_request", "make_summarizer", "plan_cut"]

logger = logging.getLogger("summarization_pydantic_ai")

_VERIFY_NEAR = 0.8


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


@dataclass
class SummarizationProcessor(WorkingSetSettings, HistoryProcessor):
    """Summarize the oldest part of the history when a trigger fires, keeping the recent tail.

    The whole replaced span reaches the summarizer (chunked when large), the previous summary is updated
    (rolling), the cut never separates a tool call from its result, and the system prompt is kept. The summary
    is a `ModelRequest` with a `CompactionPart` whose metadata lists the message ids it covers; the working set
    (latest request, pinned messages, todo list, recent errors and tool exchanges) follows it verbatim. If the
    summarizer fails (raises, times out, returns empty text) the deterministic summary is used and a
    [`SummarizerFallback`][summarization_pydantic_ai.SummarizerFallback] event is reported.

    Use it as a capability (`Agent(capabilities=[processor])`: the summary is written into the run's history
    once) or as a plain processor (`ProcessHistory(processor)` or `await processor(messages)`).

    Example:
        ```python
        processor = SummarizationProcessor('openai:gpt-4.1-mini', trigger=('fraction', 0.8), keep=('messages', 20))
        agent = Agent('openai:gpt-4.1', capabilities=[processor])
        ```
    """

    model: Any = RUN_MODEL
    """The summarizer: `RUN_MODEL` (the run's own model, the default), a model name, a pydantic-ai `Model`, a
    `Summarizer`, or `None` for the deterministic one. Outside a run, `RUN_MODEL` means `model_name` when set;
    when no model can be called the deterministic summary is used (one warning per processor)."""
    trigger: Any = ("fraction", 0.8)
    """A `ContextSize` or a list of them (any fires): `("messages", n)`, `("tokens", n)`, `("fraction", f)`."""
    keep: Any = ("messages", 20)
    """What survives the summary: an `int` number of messages or a `ContextSize`; 0 keeps the in-flight exchange."""
    keep_head: Any = 0
    """Leading messages always kept verbatim (the system prompt is always kept regardless): an `int` number of
    messages, or `("messages", n)`, `("tokens", n)` (the leading messages within n tokens) or `("fraction", f)`
    of the token budget; the head is extended so it never splits a tool call from its results."""
    max_tokens: int | None = None
    """The context window; default: from `model_name`, else the run's model (genai-prices), else 200,000 (warned)."""
    model_name: str | None = None
    """The agent's model name, to look its context window up in plain (non-capability) use."""
    reserve_output_tokens: int = 0
    """Subtracted from the window before fractions apply, so the answer fits too."""
    token_counter: TokenCounter = count_tokens_approximately
    prompt_template: str | None = None
    """A custom summary prompt with `{messages}`; may use `{previous_summary}`, `{focus}`, `{latest_user_request}`."""
    summary_timeout: float | None = 120.0
    focus: str | None = None
    event_callback: EventCallback | None = None
    required_sections: Sequence[str] = DEFAULT_REQUIRED_SECTIONS
    """Headings a summary must have (`## Intent` ...); a summary without one is refused (asked again once,
    then the deterministic summary, which always has them, is used)."""
    _fallback_warning: WarnOnce = field(default_factory=WarnOnce, repr=False, compare=False)
    """Shared by the per-run copies: one warning per processor when the summarizer falls back."""
    _summarizer: Summarizer = field(init=False, repr=False)
    cache_policy: CachePolicy | None = None
    """Plan the summaries by what they cost with the prompt cache counted: a token trigger then fires where the
    summary pays for its cache re-write, at the latest at the policy's limit; the kept tail is thinned first
    (see `CachePolicy`)."""
    _triggers: tuple[ContextSize, ...] = field(init=False, repr=False)
    _keep: ContextSize = field(init=False, repr=False)
    _keep_head: ContextSize = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._check_working_set()
        self._triggers, self._keep = validate_cut_settings(
            self.trigger,
            self.keep,
            token_counter=self.token_counter,
            reserve_output_tokens=self.reserve_output_tokens,
            max_tokens=self.max_tokens,
        )
        self._keep_head = normalize_keep_head(self.keep_head)
        if self.prompt_template is not None:
            validate_template(self.prompt_template)
        self.required_sections = check_sections(self.required_sections)
        self._summarizer = make_summarizer(
            self.model, prompt_template=self.prompt_template, timeout=self.summary_timeout
        )

    @property
    def _needs_budget(self) -> bool:
        return any(size[0] == "fraction" for size in (*self._triggers, self._keep, self._keep_head))

    async def process(self, messages: list[ModelMessage], run: RunInfo | None) -> list[ModelMessage]:
        if not messages or not self._triggers:
            return messages
        budget = resolve_budget(self.max_tokens, self.model_name, self.reserve_output_tokens, run, self._needs_budget)
        size = await self._measure(messages, run, budget)
        policy = self.cache_policy
        if policy is None:
            if not any(size.reaches(t) for t in self._triggers):
                return messages
            return await self._compact(messages, size, budget, self.focus, run)
        if not any(policy.due(messages, size, t, self._keep) for t in self._triggers):
            return messages
        thinned = thin_outputs(messages, max_chars=policy.thin_chars) if policy.thin else messages
        result = await self._compact(thinned, size, budget, self.focus, run)
        if result is thinned and thinned is not messages:  # thinning alone brought it down: nothing to summarize
            event = thinning_event(type(self).__name__, messages, thinned)
            if event is not None:
                await emit_event(self.event_callback, event)
        return result

    async def compact(self, messages: Sequence[ModelMessage], focus: str | None = None) -> list[ModelMessage]:
        """Summarize now, whatever the triggers say; returns the new history (the input if nothing to summarize)."""
        messages = list(messages)
        budget = resolve_budget(self.max_tokens, self.model_name, self.reserve_output_tokens, None, self._needs_budget)
        size = await self._measure(messages, None, budget)
        return await self._compact(messages, size, budget, focus or self.focus)

    async def _measure(self, messages: list[ModelMessage], run: RunInfo | None, budget: int | None) -> Measure:
        thresholds = [t for t in (Measure(0, 0, budget).token_threshold(s) for s in self._triggers) if t is not None]
        threshold = min(thresholds) if thresholds else None
        size = await measure(messages, self.token_counter, run, budget, threshold)
        if threshold is not None and size.tokens >= _VERIFY_NEAR * threshold:
            # Near the trigger the cached prefix is checked in full before acting on it.
            exact = _verified_count(self.token_counter, messages)
            if exact is not None:
                overhead = run.request.overhead_tokens if run else 0
                size = Measure(size.messages, exact + overhead, budget)
        return size

    async def _compact(
        self,
        messages: list[ModelMessage],
        size: Measure,
        budget: int | None,
        focus: str | None,
        run: RunInfo | None = None,
    ) -> list[ModelMessage]:
        name = type(self).__name__
        working_set = self._working_set_options(budget, self._triggers)
        plan = await plan_cut(messages, self._keep, self._keep_head, self.token_counter, budget, working_set)
        if plan is None:
            await emit_event(
                self.event_callback, CompactionSkipped(name, "nothing new to summarize", size.tokens, size.messages)
            )
            return messages
        await emit_event(
            self.event_callback, CompactionStarted(name, len(messages), size.tokens, plan.head_end, plan.cutoff, focus)
        )
        outcome = await summarize_with_fallback(
            plan,
            self._summarizer,
            focus=focus,
            latest_request=latest_user_request(messages),
            first_index=plan.head_end,
            live=self._live_request(messages, size, run),
            window_tokens=budget,
            kept_messages=len(messages) - plan.cutoff,
            required_sections=self.required_sections,
            warning=self._fallback_warning,
        )
        model = getattr(self._summarizer, "model_name", None)
        if outcome.fallback_reason:
            await emit_event(self.event_callback, SummarizerFallback(name, outcome.fallback_reason, model))
        result = assemble(messages, plan, build_summary_message(plan, outcome, focus=focus))
        problems = new_problems(messages, result)
        if problems:  # a safety net: never hand a provider a history this processor broke
            logger.error("%s: compaction would break the history (%s); history left unchanged", name, problems)
            return messages
        if not shrinks(messages, result):
            await emit_event(self.event_callback, CompactionSkipped(name, NOT_SMALLER, size.tokens, size.messages))
            return messages
        tokens_after = await async_count_tokens(self.token_counter, result)
        completed = completed_event(
            name, messages, result, plan, outcome, tokens_before=size.tokens, tokens_after=tokens_after, model=model
        )
        await emit_event(self.event_callback, completed)
        return result

    def _live_request(self, messages: list[ModelMessage], size: Measure, run: RunInfo | None) -> LiveRequest | None:
        """The run's request (for `RUN_MODEL` and a cache-aligned summary); outside a run, `model_name`."""
        live = live_request(run, messages, size.tokens)
        if live is None and self.model_name:
            return LiveRequest(self.model_name)
        return live


def live_request(run: RunInfo | None, messages: Sequence[ModelMessage], tokens: int) -> LiveRequest | None:
    """The request a capability is preparing, as a summarizer using the run's model reuses it."""
    if run is None:
        return None
    request = run.request
    return LiveRequest(request.model, messages, request.model_settings, request.model_request_parameters, tokens)


def _verified_count(counter: TokenCounter, messages: Sequence[ModelMessage]) -> int | None:
    if isinstance(counter, IncrementalCounter):
        return counter.count(messages, verify=True)
    if counter is count_tokens_approximately:
        from .._tokens import _default_counter  # pyright: ignore[reportPrivateUsage]

        return _default_counter.count(messages, verify=True)
    return None
