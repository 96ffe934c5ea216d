"""`SummarizationProcessor`: replace the old part of a history with a summary when a trigger fires."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage

from .._background import (
    BackgroundCompaction,
    Prepared,
    background_tokens,
    check_background_below,
    normalize_background_start,
    run_with_background,
)
from .._cache_policy import CachePolicy
from .._compaction import (
    NOT_SMALLER,
    CompactionPlan,
    assemble,
    build_summary_message,
    completed_event,
    shrinks,
)
from .._events import (
    CompactionSkipped,
    CompactionStarted,
    EventCallback,
    SummarizerFallback,
    emit_event,
)
from .._pinning import WorkingSetSettings
from .._sizes import ContextSize, Measure, normalize_keep_head
from .._summary_run import SummaryOutcome, WarnOnce
from .._thinning import thin_outputs, thinning_event
from .._tokens import IncrementalCounter, TokenCounter, async_count_tokens, count_tokens_approximately
from ..summarize import Summarizer, latest_user_request
from ..summarize._models import RUN_MODEL
from ..summarize._protocol import LiveRequest
from ..summarize._template import validate_template
from ..summarize._validate import DEFAULT_REQUIRED_SECTIONS, check_sections
from ._base import HistoryProcessor, RunInfo, measure, resolve_budget, validate_cut_settings
from ._summary_plan import live_request, make_summarizer, new_problems, plan_cut, summarize_plan

__all__ = ["SummarizationProcessor"]

logger = logging.getLogger("summarization_pydantic_ai")

_VERIFY_NEAR = 0.8


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
    background_start: Any = None
    """Prepare the next summary during the run once a request reaches this (a fraction of the budget such as
    `0.6`, an `int` of tokens, `("fraction", f)` or `("tokens", n)`; below the trigger): when the trigger fires,
    the prepared summary is used at once, with no model call on the request path (see "Background compaction").
    Capability form only (the run owns the preparation); `None`: off."""
    _background: BackgroundCompaction | None = field(default=None, init=False, repr=False, compare=False)
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
        self._background_start = normalize_background_start(self.background_start)
        check_background_below(self._background_start, self._triggers)
        if self.prompt_template is not None:
            validate_template(self.prompt_template)
        self.required_sections = check_sections(self.required_sections)
        self._summarizer = make_summarizer(
            self.model, prompt_template=self.prompt_template, timeout=self.summary_timeout
        )

    @property
    def _needs_budget(self) -> bool:
        sizes = (*self._triggers, self._keep, self._keep_head, self._background_start or self._keep)
        return any(size[0] == "fraction" for size in sizes)

    async def process(self, messages: list[ModelMessage], run: RunInfo | None) -> list[ModelMessage]:
        if not messages or not self._triggers:
            return messages
        budget = resolve_budget(self.max_tokens, self.model_name, self.reserve_output_tokens, run, self._needs_budget)
        size = await self._measure(messages, run, budget)
        policy = self.cache_policy
        if policy is None:
            if not any(size.reaches(t) for t in self._triggers):
                await self._prepare_in_background(messages, size, budget, run)
                return messages
            return await self._compact(messages, size, budget, self.focus, run, original=messages)
        if not any(policy.due(messages, size, t, self._keep) for t in self._triggers):
            await self._prepare_in_background(messages, size, budget, run)
            return messages
        thinned = self._planned(messages)
        result = await self._compact(thinned, size, budget, self.focus, run, original=messages)
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

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Callable[[], Awaitable[Any]]) -> Any:
        if self._background_start is None:
            return await handler()
        return await run_with_background(handler, partial(setattr, self, "_background"))

    def _planned(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The messages a compaction works on: outputs thinned under a cache policy that thins."""
        policy = self.cache_policy
        return thin_outputs(messages, max_chars=policy.thin_chars) if policy and policy.thin else messages

    def _ceiling(self, messages: list[ModelMessage], size: Measure) -> int | None:
        """The lowest token trigger (as the cache policy moves it): a prepared summary must bring the history
        under it, and a preparation starts only below it."""
        policy = self.cache_policy
        thresholds = [t for t in map(size.token_threshold, self._triggers) if t is not None]
        if policy is not None:
            thresholds = [policy.planned_threshold(messages, size, t, self._keep) for t in thresholds]
        return min(thresholds) if thresholds else None

    async def _prepare_in_background(
        self, messages: list[ModelMessage], size: Measure, budget: int | None, run: RunInfo | None
    ) -> None:
        """Start preparing the next summary if `size` reached `background_start` (and none is held, or the one
        held went stale)."""
        background, start = self._background, self._background_start
        start_tokens = background_tokens(start, budget) if start is not None else None
        if background is None or start_tokens is None or size.tokens < start_tokens:
            return
        ceiling = self._ceiling(messages, size)
        latest = latest_user_request(messages)
        if (ceiling is not None and size.tokens >= ceiling) or not background.wants(messages, latest):
            return
        planned = self._planned(messages)
        working_set = self._working_set_options(budget, self._triggers)
        plan = await plan_cut(planned, self._keep, self._keep_head, self.token_counter, budget, working_set)
        if plan is not None:
            live = self._live_request(planned, size, run)
            background.start(messages, plan, latest, partial(self._summarize, planned, plan, None, live, budget))

    async def _take_prepared(
        self, original: list[ModelMessage], messages: list[ModelMessage], plan: CompactionPlan, size: Measure
    ) -> Prepared | None:
        """A summary prepared in the background for this compaction, if it is still good (see the middleware's)."""
        background = self._background
        if background is None:
            return None
        prepared = background.take(original, latest_user_request(original), plan)
        if prepared is None:
            return None
        result = assemble(messages, prepared.plan, build_summary_message(prepared.plan, prepared.outcome, focus=None))
        fits = not new_problems(messages, result) and shrinks(messages, result)
        ceiling = self._ceiling(original, size)
        if fits and ceiling is not None:
            overhead = size.tokens - await async_count_tokens(self.token_counter, messages)
            fits = await async_count_tokens(self.token_counter, result) + overhead < ceiling
        if not fits:
            background.reject(prepared)
            return None
        return prepared

    def _summarize(
        self,
        messages: list[ModelMessage],
        plan: CompactionPlan,
        focus: str | None,
        live: LiveRequest | None,
        budget: int | None,
    ) -> Awaitable[SummaryOutcome]:
        required, warning = self.required_sections, self._fallback_warning
        return summarize_plan(
            messages,
            plan,
            self._summarizer,
            focus=focus,
            live=live,
            budget=budget,
            required_sections=required,
            warning=warning,
        )

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
        *,
        original: list[ModelMessage] | None = None,
    ) -> list[ModelMessage]:
        """Summarize `messages` (`original`: as the trigger saw them, before thinning; a compaction the trigger
        fired may use a summary prepared in the background)."""
        name = type(self).__name__
        working_set = self._working_set_options(budget, self._triggers)
        plan = await plan_cut(messages, self._keep, self._keep_head, self.token_counter, budget, working_set)
        if self._background is not None and plan is None:
            self._background.discard()
        if plan is None:
            await emit_event(
                self.event_callback, CompactionSkipped(name, "nothing new to summarize", size.tokens, size.messages)
            )
            return messages
        prepared = await self._take_prepared(original, messages, plan, size) if original is not None else None
        plan = prepared.plan if prepared is not None else plan
        background = prepared is not None
        started = CompactionStarted(name, len(messages), size.tokens, plan.head_end, plan.cutoff, focus, background)
        await emit_event(self.event_callback, started)
        if prepared is not None:
            outcome = prepared.outcome
        else:
            outcome = await self._summarize(messages, plan, focus, self._live_request(messages, size, run), budget)
        if self._background is not None:
            outcome = self._background.with_wasted_usage(outcome)
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
            name,
            messages,
            result,
            plan,
            outcome,
            tokens_before=size.tokens,
            tokens_after=tokens_after,
            model=model,
            prepared_in_background=background,
        )
        await emit_event(self.event_callback, completed)
        return result

    def _live_request(self, messages: list[ModelMessage], size: Measure, run: RunInfo | None) -> LiveRequest | None:
        """The run's request (for `RUN_MODEL` and a cache-aligned summary); outside a run, `model_name`."""
        live = live_request(run, messages, size.tokens)
        if live is None and self.model_name:
            return LiveRequest(self.model_name)
        return live


def _verified_count(counter: TokenCounter, messages: Sequence[ModelMessage]) -> int | None:
    if isinstance(counter, IncrementalCounter):
        return counter.count(messages, verify=True)
    if counter is count_tokens_approximately:
        from .._tokens import _default_counter  # pyright: ignore[reportPrivateUsage]

        return _default_counter.count(messages, verify=True)
    return None
