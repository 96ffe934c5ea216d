"""Background compaction for `ContextManagerMiddleware` (`background_start`; see `.._background`).

The run's task group lives in `wrap_run`. Below the trigger, a request at or above `background_start` starts the
summary of the span the next compaction would replace (planned as the synchronous path plans it); when the
trigger fires, `_take_prepared` hands a prepared summary to the ordinary commit (`CompressionMixin`), which
records, appends and reports exactly as it does for a summary written on the request path. Nothing here writes to
the history store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage

from .._background import BackgroundCompaction, Prepared, background_tokens, run_with_background
from .._compaction import CompactionPlan, assemble_merged, build_summary_message, shrinks
from .._sizes import ContextSize, Measure
from .._summary_run import SummaryOutcome
from .._tokens import async_count_tokens
from ..processors._base import RunInfo
from ..processors._summary_plan import live_request, new_problems
from ..store import HistoryStore
from ..summarize import latest_user_request
from ._compress import CompressionMixin
from ._state import RunState

__all__ = ["BackgroundMixin"]


class BackgroundMixin(CompressionMixin):
    """The background half of the middleware (the fields it reads are the middleware's)."""

    _background_start: ContextSize | None

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Callable[[], Awaitable[Any]]) -> Any:
        state = self._run
        if self._background_start is None or state is None:
            return await handler()

        def attach(background: BackgroundCompaction | None) -> None:
            state.background = background

        return await run_with_background(handler, attach)

    async def _prepare_in_background(
        self,
        messages: list[ModelMessage],
        size: Measure,
        budget: int,
        threshold_tokens: int,
        run: RunInfo | None,
        state: RunState,
        store: HistoryStore | None,
    ) -> None:
        """Start preparing the next compaction's summary if `size` reached `background_start` below the trigger
        and none is held (or the one held went stale). At most one preparation per session is in flight."""
        background = state.background
        start = self._background_start
        if background is None or start is None:
            return
        start_tokens = background_tokens(start, budget)
        if start_tokens is None or not start_tokens <= size.tokens < threshold_tokens:
            return
        latest = latest_user_request(messages)
        if not background.wants(messages, latest) or not self._shared.claim_preparation(store, background):
            return
        planned, plan = await self._plan(messages, budget)
        if plan is None:
            return
        live = self._live_or_model(live_request(run, planned, size.tokens))

        async def summarize() -> SummaryOutcome:
            return await self._summarize_plan(planned, plan, None, live, budget)

        background.start(messages, plan, latest, summarize)

    async def _take_prepared(
        self,
        original: list[ModelMessage],
        messages: list[ModelMessage],
        plan: CompactionPlan | None,
        focus: str | None,
        ceiling: int | None,
    ) -> Prepared | None:
        """The prepared summary, if it is still good for this compaction: prepared for the same history (see
        `BackgroundCompaction.take`), a compaction the trigger fired (not a `/compact` with a focus), and a result
        that is valid, smaller, and under the trigger (`ceiling`). Otherwise the compaction is synchronous."""
        background = self._run.background if self._run is not None else None
        if background is None:
            return None
        if plan is None or focus is not None:
            background.discard()
            return None
        prepared = background.take(original, latest_user_request(original), plan)
        if prepared is None:
            return None
        summary = build_summary_message(prepared.plan, prepared.outcome, focus=None)
        result, _ = assemble_merged(messages, prepared.plan, summary)
        fits = not new_problems(messages, result) and shrinks(messages, result)
        if fits and ceiling is not None:
            fits = await async_count_tokens(self.token_counter, result) < ceiling
        if not fits:
            background.reject(prepared)
            return None
        return prepared

    def _with_wasted_usage(self, outcome: SummaryOutcome) -> SummaryOutcome:
        background = self._run.background if self._run is not None else None
        return outcome if background is None else background.with_wasted_usage(outcome)
