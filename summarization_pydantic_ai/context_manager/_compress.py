"""Compression for `ContextManagerMiddleware`: plan, summarize, assemble, record, report — or leave it all as it was."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, SystemPromptPart

from .._background import Prepared
from .._cache_policy import CachePolicy
from .._compaction import (
    NOT_SMALLER,
    CompactionPlan,
    assemble_merged,
    build_summary_message,
    completed_event,
    plan_compaction,
    shrinks,
)
from .._events import (
    CallbackFailed,
    CompactionFailed,
    CompactionSkipped,
    CompactionStarted,
    EventCallback,
    SummarizerFallback,
    emit_event,
)
from .._messages import get_message_id, summary_info
from .._sizes import ContextSize, Measure
from .._summary_run import SummaryOutcome
from .._thinning import thin_outputs, thinning_event
from .._tokens import TokenCounter, async_count_tokens
from .._working_set import WorkingSetOptions
from ..processors._summary_plan import keep_message_counter, new_problems, summarize_plan
from ..store import HistoryStore, ensure_message_id
from ..summarize import LiveRequest, Summarizer
from ._state import RunState, SharedState, call_callback, record_new_messages

__all__ = ["NAME", "CompressionMixin", "link_summary"]

logger = logging.getLogger("summarization_pydantic_ai")

NAME = "ContextManagerMiddleware"


class CompressionMixin:
    """The compression half of the middleware (the fields it reads are the middleware's)."""

    _keep: ContextSize
    _summarizer: Summarizer
    _shared: SharedState
    _run: RunState | None
    _plain: RunState
    model_name: str | None
    required_sections: Sequence[str]
    cache_policy: CachePolicy | None
    token_counter: TokenCounter
    event_callback: EventCallback | None
    on_before_compress: Callable[[list[ModelMessage], int], Awaitable[None] | None] | None
    on_after_compress: Callable[[list[ModelMessage]], Awaitable[str | None] | str | None] | None
    expose_history_tool: bool
    _working_set_options: Callable[[int | None], WorkingSetOptions]

    async def _compress(
        self,
        messages: list[ModelMessage],
        size: Measure,
        budget: int,
        focus: str | None,
        store: HistoryStore | None,
        ctx: RunContext[Any] | None,
        *,
        live: LiveRequest | None = None,
        ceiling: int | None = None,
    ) -> list[ModelMessage]:
        """Compact `messages` and return the new working history, or `messages` itself when nothing changed
        (nothing to summarize, or a failure: then nothing is committed). `live` is the run's request being
        prepared, reused by a summarizer that uses the run's model (without it, the run's model is still used,
        with the span rendered as text). `ceiling`: the tokens (by `token_counter`) a history compacted with a
        summary prepared in the background must stay under to be used (the trigger, less the request's
        instructions and tools)."""
        started = time.perf_counter()
        span = ctx.tracer.start_as_current_span("context_manager.compress") if ctx is not None else nullcontext(None)
        with span as otel_span:
            try:
                live = self._live_or_model(live)
                result = await self._compress_inner(messages, size, budget, focus, store, live, ceiling)
            except Exception as exc:
                logger.exception("compression failed; the history is left as it was")
                error = f"{type(exc).__name__}: {exc}"
                event = CompactionFailed(NAME, error, size.tokens, size.messages, time.perf_counter() - started)
                await emit_event(self.event_callback, event)
                if otel_span is not None:
                    otel_span.set_attribute("context_manager.error", error)
                return messages
            if otel_span is not None:
                attributes: dict[str, Any] = {
                    "context_manager.tokens_before": size.tokens,
                    "context_manager.messages_before": size.messages,
                    "context_manager.messages_after": len(result),
                    "context_manager.duration_s": time.perf_counter() - started,
                    "context_manager.summarizer": str(getattr(self._summarizer, "name", "custom")),
                }
                if focus:
                    attributes["context_manager.focus"] = focus
                otel_span.set_attributes(attributes)
            return result

    async def _compress_inner(
        self,
        messages: list[ModelMessage],
        size: Measure,
        budget: int,
        focus: str | None,
        store: HistoryStore | None,
        live: LiveRequest | None,
        ceiling: int | None = None,
    ) -> list[ModelMessage]:
        original = messages
        record = list(messages)
        messages, plan = await self._plan(messages, budget)
        prepared = await self._take_prepared(original, messages, plan, focus, ceiling)
        plan = prepared.plan if prepared is not None else plan
        if plan is None:
            return await self._nothing_to_summarize(original, messages, size, store)
        _, error = await call_callback("on_before_compress", self.on_before_compress, list(messages), plan.cutoff)
        if error:
            await emit_event(self.event_callback, CallbackFailed(NAME, "on_before_compress", error))
        background = prepared is not None
        started = CompactionStarted(NAME, len(messages), size.tokens, plan.head_end, plan.cutoff, focus, background)
        await emit_event(self.event_callback, started)
        if prepared is not None:
            outcome = prepared.outcome
        else:
            outcome = await self._summarize_plan(messages, plan, focus, live, budget)
        outcome = self._with_wasted_usage(outcome)
        model = getattr(self._summarizer, "model_name", None)
        if outcome.fallback_reason:
            await emit_event(self.event_callback, SummarizerFallback(NAME, outcome.fallback_reason, model))
        summary = build_summary_message(plan, outcome, focus=focus)
        if self.expose_history_tool and store is not None:
            summary = _with_rehydration_hint(summary)
        result, merged = assemble_merged(messages, plan, summary)
        reinjected, error = await call_callback("on_after_compress", self.on_after_compress, list(result))
        if error:
            await emit_event(self.event_callback, CallbackFailed(NAME, "on_after_compress", error))
        if isinstance(reinjected, str) and reinjected.strip():
            summary = replace(summary, parts=[*summary.parts, SystemPromptPart(reinjected)])
            result, merged = assemble_merged(messages, plan, summary)
        problems = new_problems(messages, result)
        if problems:
            raise RuntimeError(f"the compacted history would be invalid: {problems}")
        if not shrinks(messages, result):
            await emit_event(self.event_callback, CompactionSkipped(NAME, NOT_SMALLER, size.tokens, size.messages))
            return messages
        link_summary(result, merged)
        tokens_after = await async_count_tokens(self.token_counter, result)
        _note_sizes(merged, size.tokens, tokens_after)
        if store is not None:
            # The commit: every replaced message is in the archive before the summary, and the working history
            # changes only once both are written (an exception here leaves it exactly as it was).
            await record_new_messages(self._run or self._plain, record, store)
            await store.append([merged])
        with self._shared.lock:
            self._shared.compression_count += 1
        completed = completed_event(
            NAME,
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

    async def _nothing_to_summarize(
        self, original: list[ModelMessage], messages: list[ModelMessage], size: Measure, store: HistoryStore | None
    ) -> list[ModelMessage]:
        """`messages` when thinning alone brought the history down (recorded and reported), else `original`."""
        if messages is not original:
            if store is not None:
                await record_new_messages(self._run or self._plain, original, store)
            thinned = thinning_event(NAME, original, messages)
            if thinned is not None:
                await emit_event(self.event_callback, thinned)
            return messages
        await emit_event(
            self.event_callback, CompactionSkipped(NAME, "nothing new to summarize", size.tokens, size.messages)
        )
        return original

    async def _plan(
        self, messages: list[ModelMessage], budget: int
    ) -> tuple[list[ModelMessage], CompactionPlan | None]:
        """What a compaction of `messages` would replace (the same whether it runs now or in the background):
        the messages it works on (outputs thinned for a planned compaction: it reaches further back) and its plan."""
        policy = self.cache_policy
        if policy is not None and policy.thin:
            messages = thin_outputs(messages, max_chars=policy.thin_chars)
        keep_counter = await keep_message_counter(messages, self._keep, self.token_counter, budget)
        plan = plan_compaction(
            messages,
            self._keep,
            max_tokens=budget,
            message_tokens=keep_counter,
            working_set=self._working_set_options(budget),
        )
        return messages, plan

    async def _summarize_plan(
        self,
        messages: list[ModelMessage],
        plan: CompactionPlan,
        focus: str | None,
        live: LiveRequest | None,
        budget: int,
    ) -> SummaryOutcome:
        """The summary of `plan`'s span (asked of the summarizer, checked, else the deterministic summary)."""
        return await summarize_plan(
            messages,
            plan,
            self._summarizer,
            focus=focus,
            live=live,
            budget=budget,
            required_sections=self.required_sections,
            warning=self._shared.fallback_warning,
        )

    async def _take_prepared(
        self,
        original: list[ModelMessage],
        messages: list[ModelMessage],
        plan: CompactionPlan | None,
        focus: str | None,
        ceiling: int | None,
    ) -> Prepared | None:
        """Overridden by the background half: a summary prepared during the run, usable for this compaction."""
        return None

    def _with_wasted_usage(self, outcome: SummaryOutcome) -> SummaryOutcome:
        """Overridden by the background half: the spend of discarded preparations, recorded with this summary."""
        return outcome

    def _live_or_model(self, live: LiveRequest | None) -> LiveRequest | None:
        """`live`; else the run's model alone (its latest request may not be reusable, e.g. after an overflow);
        else `model_name`, outside a run."""
        if live is not None:
            return live
        run = self._run
        if run is not None and run.model is not None:
            return LiveRequest(run.model)
        return LiveRequest(self.model_name) if self.model_name else None


def link_summary(result: list[ModelMessage], summary: ModelRequest) -> None:
    """Give the summary its id and record what the working context was around it (for `HistoryStore.load`)."""
    ensure_message_id(summary)
    position = next(i for i, m in enumerate(result) if m is summary)
    info = summary_info(summary)
    assert info is not None
    info["working_before"] = [get_message_id(m) for m in result[:position]]
    info["working_after"] = [get_message_id(m) for m in result[position + 1 :]]


def _note_sizes(summary: ModelRequest, tokens_before: int, tokens_after: int) -> None:
    """Record the working context's size before and after the compaction (our count) with the summary: what it
    removed, for the savings estimate (`session_costs`) and the session report."""
    info = summary_info(summary)
    assert info is not None
    info["tokens_before"], info["tokens_after"] = tokens_before, tokens_after


def _with_rehydration_hint(summary: ModelRequest) -> ModelRequest:
    """Tell the agent where the summarized originals are, by message id."""
    part = summary.parts[0]
    info = summary_info(summary) or {}
    first, last = info.get("first_id"), info.get("last_id")
    if not (isinstance(part, CompactionPart) and first and last):
        return summary
    hint = f'\n\n(The summarized messages are kept verbatim: read_history(start_id="{first}", end_id="{last}").)'
    return replace(summary, parts=[replace(part, content=(part.content or "") + hint), *summary.parts[1:]])
