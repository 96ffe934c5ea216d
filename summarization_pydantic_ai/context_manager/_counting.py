"""The counting half of the middleware: the budget a request is measured against, the usage it reports before each
request, and the token counter whose counts the recording can serve."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .._events import CallbackFailed, EventCallback, UsageUpdated, emit_event
from .._sizes import Measure
from .._tokens import (
    IncrementalCounter,
    TokenCounter,
    _default_counter,  # pyright: ignore[reportPrivateUsage]
    count_tokens_approximately,
)
from .._windows import DEFAULT_MAX_TOKENS, resolve_max_tokens
from ..store import HistoryStore
from ._compress import NAME
from ._state import ContextUsage, SharedState, call_callback

__all__ = ["CountingMixin", "UsageCallback", "incremental"]

logger = logging.getLogger("summarization_pydantic_ai")

UsageCallback = Callable[[float, int, int], Awaitable[None] | None]

_defaulted: set[str] = set()


class CountingMixin:
    """The counting half of the middleware (the fields it reads are the middleware's)."""

    max_tokens: int | None
    model_name: str | None
    reserve_output_tokens: int
    compress_threshold: float
    on_usage_update: UsageCallback | None
    event_callback: EventCallback | None
    _shared: SharedState

    def _budget(self, model: Any) -> tuple[int, str]:
        """(budget, source): the window minus the output reserve, and where the window came from."""
        window, source = self.max_tokens, "explicit"
        if window is None and self.model_name:
            window, source = resolve_max_tokens(self.model_name), "model"
        if window is None and model is not None:
            window, source = getattr(model, "context_window", None) or resolve_max_tokens(model), "model"
        if window is None:
            window, source = DEFAULT_MAX_TOKENS, "default"
            # A named model was looked up, and resolve_max_tokens said so once per name; a scripted model
            # (TestModel, FunctionModel) has no window to report. Only "no model at all" is reported here.
            if self.model_name is None and model is None and "" not in _defaulted:
                _defaulted.add("")
                logger.warning("context window unknown (no model_name): assuming %d tokens (set max_tokens)", window)
        return max(window - self.reserve_output_tokens, 1), source

    async def _report_usage(self, size: Measure, budget: int, source: str, store: HistoryStore | None) -> None:
        usage = ContextUsage(
            tokens=size.tokens,
            max_tokens=budget,
            threshold=self.compress_threshold,
            messages=size.messages,
            compressions=self._shared.compression_count,
            history_bytes=store.size_bytes() if store is not None else None,
            max_tokens_source=source,
        )
        self._shared.last_usage = usage
        await emit_event(self.event_callback, UsageUpdated(NAME, usage.pct, size.tokens, budget, size.messages))
        _, error = await call_callback("on_usage_update", self.on_usage_update, usage.pct, size.tokens, budget)
        if error:
            await emit_event(self.event_callback, CallbackFailed(NAME, "on_usage_update", error))


def incremental(counter: TokenCounter) -> IncrementalCounter | None:
    """The counter as an `IncrementalCounter` whose counts the recording's history check can serve (exactly that
    class: a subclass may count differently), or `None`."""
    if counter is count_tokens_approximately:
        return _default_counter
    if isinstance(counter, IncrementalCounter) and type(counter) is IncrementalCounter:
        return counter
    return None
