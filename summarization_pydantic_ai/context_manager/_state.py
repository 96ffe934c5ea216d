"""State of the middleware: shared across runs (counts, pending requests) and per run (trigger, recording)."""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage

from .._messages import get_message_id
from ..store import HistoryStore, ensure_message_id

__all__ = ["ContextUsage", "RunState", "SharedState", "call_callback", "record_new_messages"]

logger = logging.getLogger("summarization_pydantic_ai")


@dataclass(frozen=True)
class ContextUsage:
    """A snapshot of the working context, as measured before the latest model request (for `/context`)."""

    tokens: int
    max_tokens: int
    """The budget: the context window minus `reserve_output_tokens`."""
    threshold: float
    messages: int
    compressions: int
    history_bytes: int | None
    """Size of the history file, when there is one."""
    max_tokens_source: str = "explicit"
    """`'explicit'`, `'model'` (genai-prices or the model profile) or `'default'` (unknown model: 200,000)."""

    @property
    def pct(self) -> float:
        """Used fraction of `max_tokens` (0.4 means 40%)."""
        return self.tokens / self.max_tokens if self.max_tokens else 0.0

    @property
    def threshold_tokens(self) -> int:
        return int(self.threshold * self.max_tokens)


_NO_FOCUS = object()


@dataclass
class SharedState:
    """What every run of one middleware instance shares (guarded by a lock: runs may be concurrent)."""

    compression_count: int = 0
    pending_compacts: list[str | None] = field(default_factory=list[str | None])
    last_usage: ContextUsage | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take_pending(self) -> object:
        """The focus of a pending `request_compact` (possibly `None`), or `_NO_FOCUS` when none is pending."""
        with self.lock:
            return self.pending_compacts.pop(0) if self.pending_compacts else _NO_FOCUS


@dataclass
class RunState:
    """Per-run bookkeeping: whether the trigger is armed, and how far the history has been recorded."""

    armed: bool = True
    recorded_length: int = 0
    recorded_last: ModelMessage | None = None
    retry_messages: list[ModelMessage] | None = None
    overflow_retries: int = 0

    def mark_recorded(self, messages: Sequence[ModelMessage]) -> None:
        self.recorded_length = len(messages)
        self.recorded_last = messages[-1] if messages else None

    def unrecorded_start(self, messages: Sequence[ModelMessage]) -> int:
        """Where new messages begin: after the recorded prefix when the history only grew, else 0 (full scan)."""
        n = self.recorded_length
        if n and len(messages) >= n and messages[n - 1] is self.recorded_last:
            return n
        return 0


async def record_new_messages(
    state: RunState, messages: Sequence[ModelMessage], store: HistoryStore | None
) -> list[ModelMessage]:
    """Give every new message its stable id and append it to the store. O(new messages) when the history grew."""
    start = state.unrecorded_start(messages)
    new = [
        m
        for m in messages[start:]
        if (message_id := get_message_id(m)) is None or (store is not None and message_id not in store)
    ]
    for message in new:
        ensure_message_id(message)
    if store is not None and new:
        await store.append(new)
    state.mark_recorded(messages)
    return new


async def call_callback(name: str, callback: Any, *args: Any) -> tuple[Any, str | None]:
    """Call a sync or async user callback. Returns (result, error): an exception is logged and returned as
    text for the caller to report, never raised into the run."""
    if callback is None:
        return None, None
    try:
        result = callback(*args)
        if inspect.isawaitable(result):
            result = await result
        return result, None
    except Exception as exc:
        logger.exception("%s callback %r failed; the run continues", name, callback)
        return None, f"{type(exc).__name__}: {exc}"


NO_FOCUS = _NO_FOCUS
