"""State of the middleware: shared across runs (counts, pending requests) and per run (trigger, recording)."""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage

from .._messages import get_message_id
from .._tokens import _PrefixState  # pyright: ignore[reportPrivateUsage]
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


class _RecordedHistories:
    """Per store (and one slot for "no store"): the length of the history recorded last through it, by any run or
    plain call, with a bounded sample of its message identities (the first, every k-th and the last 16, as the
    token counter keeps). A history that starts with those very messages only grew since: its prefix is recorded
    (every message has an id, and is in the store). This keeps a call without run state (the plain form, the first
    request of a run) at O(new messages) instead of checking every message of a long history."""

    def __init__(self) -> None:
        self._states: weakref.WeakKeyDictionary[object, _PrefixState] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def recorded_length(self, store: HistoryStore | None, messages: Sequence[ModelMessage]) -> int:
        key = _NO_STORE if store is None else store
        try:
            with self._lock:
                state = self._states.get(key)
        except TypeError:  # a store that cannot be weakly referenced or hashed: no shortcut
            return 0
        return state.length if state is not None and state.matches(messages) else 0

    def remember(self, store: HistoryStore | None, messages: Sequence[ModelMessage]) -> None:
        """Call only once every message of `messages` has an id and is in `store`."""
        if not messages:
            return
        state = _PrefixState.build(messages, 0)  # bounded: 16 to 32 spread messages and the last 16
        try:
            with self._lock:
                self._states[_NO_STORE if store is None else store] = state
        except TypeError:
            pass


class _NoStore:
    pass


_NO_STORE = _NoStore()
_recorded = _RecordedHistories()


async def record_new_messages(
    state: RunState, messages: Sequence[ModelMessage], store: HistoryStore | None
) -> list[ModelMessage]:
    """Give every new message its stable id and append it to the store. O(new messages) when the history grew
    since the run (or, without run state, any call through the same store) recorded it."""
    start = state.unrecorded_start(messages) or _recorded.recorded_length(store, messages)
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
    _recorded.remember(store, messages)
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
