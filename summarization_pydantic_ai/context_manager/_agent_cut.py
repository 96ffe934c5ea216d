"""The cutting half of `AgentDrivenCompression`: the history cut down to the memory the agent wrote (everything
recorded first), or, when the agent did not write one, compacted algorithmically instead."""

from __future__ import annotations

import logging
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest

from .._events import (
    AgentCompressionCompleted,
    AgentCompressionFallback,
    CompactionFailed,
    CompactionSkipped,
    ContextEvent,
    EventCallback,
    emit_event,
)
from .._sizes import Measure
from .._tokens import TokenCounter, estimate_text_tokens
from ..processors._base import RunInfo, measure
from ..store import HistoryStore
from ._agent_state import CompressionRunState
from ._capability import ContextManagerMiddleware
from ._compress import link_summary
from ._memory_file import memory_history, memory_text
from ._state import RunState, record_new_messages

__all__ = ["NAME", "MemoryCutMixin"]

logger = logging.getLogger("summarization_pydantic_ai")

NAME = "AgentDrivenCompression"


class MemoryCutMixin:
    """The cutting half of `AgentDrivenCompression` (the fields it reads are the capability's)."""

    target_ratio: float
    short_term_path: str
    token_counter: TokenCounter
    middleware: ContextManagerMiddleware | None
    history_store: HistoryStore | None
    summarization_model: Any
    event_callback: EventCallback | None

    async def _emit(self, event: ContextEvent) -> None:
        """To `event_callback`; unset, to the middleware's, so one callback sees the whole story."""
        callback = self.event_callback
        if callback is None and self.middleware is not None:
            callback = self.middleware.event_callback
        await emit_event(callback, event)

    def _limit(self, state: CompressionRunState) -> int:
        """Half the target: for the memory (the recent messages get the rest), or for the messages the fallback
        keeps (its summary gets the rest)."""
        return max(int(self.target_ratio * state.budget) // 2, 1)

    async def _compact_to_memory(
        self,
        messages: list[ModelMessage],
        before: Measure,
        state: CompressionRunState,
        ctx: RunContext[Any],
        run: RunInfo,
    ) -> list[ModelMessage]:
        text, number = memory_text(state.memory or "", self.short_term_path), state.attempts_used
        state.memory = None
        memory_tokens = estimate_text_tokens(text)
        # The target holds the whole request: the memory, the instructions and tool definitions, the recent tail.
        keep = max(int(self.target_ratio * state.budget) - memory_tokens - run.request.overhead_tokens, 0)
        try:
            built = memory_history(messages, text, keep_tokens=keep)
        except Exception as exc:  # never expected; the fallback still compacts, and the run goes on
            state.fallback = f"the memory could not be injected: {type(exc).__name__}: {exc}"
            return await self._fall_back(messages, before, state, ctx)
        if built is None:
            skipped = CompactionSkipped(
                NAME, "nothing to cut besides the in-flight exchange", before.tokens, len(messages)
            )
            await self._emit(skipped)
            return messages
        result, merged = built
        if not await self._recorded(ctx, messages, before, result, merged):
            return messages
        after = await measure(result, self.token_counter, run, state.budget, None)
        event = AgentCompressionCompleted(
            NAME, number, len(messages), len(result), before.tokens, after.tokens, memory_tokens, self.short_term_path
        )
        await self._emit(event)
        return result

    async def _recorded(
        self,
        ctx: RunContext[Any],
        messages: list[ModelMessage],
        before: Measure,
        result: list[ModelMessage] | None = None,
        merged: ModelRequest | None = None,
    ) -> bool:
        """Record every message before the working history loses it (then the memory message, linked). Returns
        whether that worked: when it did not, nothing is cut, and a `CompactionFailed` event says why."""
        store = self._store(ctx)
        if store is None:
            return True
        try:
            await record_new_messages(RunState(), messages, store)
            if result is not None and merged is not None:
                link_summary(result, merged)
                await store.append([merged])
        except Exception as exc:
            logger.exception("recording before the cut failed; the history is left as it was")
            error = f"{type(exc).__name__}: {exc}"
            await self._emit(CompactionFailed(NAME, error, before.tokens, before.messages, 0.0))
            return False
        return True

    def _store(self, ctx: RunContext[Any]) -> HistoryStore | None:
        if self.middleware is not None:
            return self.middleware._store_for_run(ctx)  # pyright: ignore[reportPrivateUsage]
        return self.history_store

    async def _fall_back(
        self, messages: list[ModelMessage], before: Measure, state: CompressionRunState, ctx: RunContext[Any]
    ) -> list[ModelMessage]:
        reason, state.fallback = state.fallback or "", None
        await self._emit(AgentCompressionFallback(NAME, state.attempts_used, reason))
        if not await self._recorded(ctx, messages, before):
            return messages
        compactor = self.middleware or ContextManagerMiddleware(
            max_tokens=state.budget,
            keep=("tokens", self._limit(state)),  # half the target; the summary takes the other half
            summarization_model=self.summarization_model,
            history_store=self.history_store,
            event_callback=self.event_callback,
        )
        return await compactor.compact(messages)
