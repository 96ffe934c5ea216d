"""One model request's pass through the middleware: record the new messages, clamp oversized parts, measure the
request, report usage, then compress once per trigger crossing (or prepare the next compaction in the background)."""

from __future__ import annotations

from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage

from ..processors._base import RunInfo, measure
from ..processors._summary_plan import live_request
from ..store import HistoryStore
from ._background import BackgroundMixin
from ._clamp import ClampingMixin
from ._counting import CountingMixin, incremental
from ._stamp import RequestMeasure
from ._state import NO_FOCUS, RunState, record_and_count

__all__ = ["PipelineMixin"]


class PipelineMixin(BackgroundMixin, CountingMixin, ClampingMixin):
    """The per-request half of the middleware (the fields it reads are the middleware's)."""

    async def _process(
        self,
        messages: list[ModelMessage],
        state: RunState,
        run: RunInfo | None,
        ctx: RunContext[Any] | None,
        store: HistoryStore | None,
    ) -> list[ModelMessage]:
        _, counted = await record_and_count(state, messages, store, incremental(self.token_counter))
        if run is not None:
            state.model = run.request.model
        budget, source = self._budget(run.request.model if run else None)
        clamped = await self._clamp_new(messages, state.clamp_seen, budget, store is not None)
        if clamped is not messages:
            messages, counted = clamped, None  # recorded as they were; sent and counted clamped
        threshold_tokens = int(self.compress_threshold * budget)
        size = await measure(messages, self.token_counter, run, budget, threshold_tokens, counted=counted)
        if self.cache_policy is not None:
            threshold_tokens = self.cache_policy.planned_threshold(messages, size, threshold_tokens, self._keep)
        state.measure = RequestMeasure(size.tokens, budget, threshold_tokens)
        await self._report_usage(size, budget, source, store)
        pending = self._shared.take_pending()
        over = size.tokens >= threshold_tokens
        if not over:
            state.armed = True
        if pending is NO_FOCUS and not (over and state.armed):
            await self._prepare_in_background(messages, size, budget, threshold_tokens, run, state, store)
            return messages
        focus = pending if isinstance(pending, str) else None
        live = live_request(run, messages, size.tokens)
        ceiling = threshold_tokens - (run.request.overhead_tokens if run is not None else 0)
        result = await self._compress(messages, size, budget, focus, store, ctx, live=live, ceiling=ceiling)
        if over:
            state.armed = False  # once per crossing: re-armed when a measure falls below the threshold
        if result is not messages and run is not None:  # the request sent is the compacted one
            after = await measure(result, self.token_counter, run, budget, threshold_tokens)
            state.measure = RequestMeasure(after.tokens, budget, threshold_tokens)
        return result
