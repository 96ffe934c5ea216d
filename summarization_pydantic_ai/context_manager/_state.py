"""State of the middleware: shared across runs (counts, pending requests) and per run (trigger, recording)."""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, cast

from pydantic_ai.messages import ModelMessage

from .._cursor import CursorTable, HistoryChange
from .._events import OverflowRetry
from .._messages import MESSAGE_ID_KEY, get_message_id
from .._summary_run import WarnOnce
from .._tokens import IncrementalCounter, _Tally  # pyright: ignore[reportPrivateUsage]
from ..store import HistoryStore
from ..store._protocol import ensure_message_ids
from ._clamp import NewMessages, clamped_part_indices
from ._truncate import TRUNCATED_METADATA_KEY

if TYPE_CHECKING:
    from .._background import BackgroundCompaction
    from ._stamp import RequestMeasure

__all__ = [
    "ContextUsage",
    "OverflowEpisode",
    "RunState",
    "SharedState",
    "call_callback",
    "is_reduction",
    "record_and_count",
    "record_new_messages",
    "unseen_from",
]

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
    fallback_warning: WarnOnce = field(default_factory=WarnOnce)
    """One warning per middleware instance when the summarizer falls back (e.g. offline, every compaction)."""
    preparing: weakref.WeakKeyDictionary[HistoryStore, weakref.ref[BackgroundCompaction]] = field(
        default_factory=weakref.WeakKeyDictionary[HistoryStore, "weakref.ref[BackgroundCompaction]"]
    )
    """Per session (its store): the run whose background preparation it is (`background_start`)."""

    def claim_preparation(self, store: HistoryStore | None, background: BackgroundCompaction) -> bool:
        """Whether `background` (a run's) may start a preparation for `store`'s session: not while another run's
        preparation for the same session is in flight (at most one per session)."""
        if store is None:
            return True  # no session to share: the run's own history
        try:
            with self.lock:
                holder = self.preparing.get(store)
                other = holder() if holder is not None else None
                if other is not None and other is not background and other.in_flight:
                    return False
                self.preparing[store] = weakref.ref(background)
                return True
        except TypeError:  # a store that cannot be weakly referenced or hashed: one per run
            return True

    def take_pending(self) -> object:
        """The focus of a pending `request_compact` (possibly `None`), or `_NO_FOCUS` when none is pending."""
        with self.lock:
            return self.pending_compacts.pop(0) if self.pending_compacts else _NO_FOCUS


@dataclass
class OverflowEpisode:
    """The recovery of one request step: its first error and the retries made for it."""

    original: BaseException
    retries: list[OverflowRetry] = field(default_factory=list[OverflowRetry])


@dataclass
class RunState:
    """Per-run bookkeeping: whether the trigger is armed, and the overflow retry in progress."""

    armed: bool = True
    conversation_checked: bool = False
    """Whether the run's history was checked against the file's conversation (at its first request)."""
    retry_messages: list[ModelMessage] | None = None
    overflow: OverflowEpisode | None = None
    """The overflow recovery of the current request step, if one is under way."""
    measure: RequestMeasure | None = None
    """The latest request as measured before it was sent (written on its response for the session report)."""
    model: Any = None
    """The run's model (from its latest request): it summarizes a compaction that has no request to reuse (the
    reactive overflow path), with `RUN_MODEL`."""
    background: BackgroundCompaction | None = None
    """The run's background preparations (`background_start`), while `wrap_run` holds their task group."""
    clamp_seen: NewMessages = field(default_factory=NewMessages)
    """The messages `max_part_tokens` looked at already (each part is clamped once, as it enters the history)."""


REDUCTION_METADATA_KEYS = ("summarization_pydantic_ai.cleared", TRUNCATED_METADATA_KEY, "pydantic_deep.eviction")
"""Part metadata keys of the toolkit's working-context reductions: a tool result cleared by
`ClearToolResultsProcessor`, cut by overflow recovery, or replaced by its preview by the harness's
`EvictionProcessor`. An edit that only makes such reductions is not a new version of the conversation (the
recorded original stays the latest)."""


class _RecordedHistories:
    """Per store (and one slot for "no store"): a `HistoryCursor` for each history recorded through it (by any run
    or plain call), keyed by its first message. What the cursor reports as unchanged is recorded; only the
    appended messages, the messages edited in place and the messages after a replacement point are looked at,
    so a call costs O(new messages), not O(history)."""

    def __init__(self) -> None:
        self._tables: weakref.WeakKeyDictionary[object, CursorTable[_Tally]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def cursor_for(self, store: HistoryStore | None, messages: Sequence[ModelMessage]) -> _Tally:
        key = _NO_STORE if store is None else store
        try:
            with self._lock:
                table = self._tables.get(key)
                if table is None:
                    table = self._tables[key] = CursorTable(factory=_recording_cursor)
                return table.cursor_for(messages)
        except TypeError:  # a store that cannot be weakly referenced or hashed: no memory, a full check each time
            return _recording_cursor()

    def find(self, store: HistoryStore | None, messages: Sequence[ModelMessage]) -> _Tally | None:
        """The cursor of `messages` if one was made for it (nothing made or moved)."""
        key = _NO_STORE if store is None else store
        try:
            with self._lock:
                table = self._tables.get(key)
                return table.find(messages) if table is not None else None
        except TypeError:
            return None


def _recording_cursor() -> _Tally:
    # Recording never asks for `verify=True`; the counts serve the middleware's token count (`record_and_count`).
    return _Tally(fingerprint_all=False)


class _NoStore:
    pass


_NO_STORE = _NoStore()
_recorded = _RecordedHistories()


def unseen_from(store: HistoryStore | None, messages: Sequence[ModelMessage]) -> int:
    """An index before which every message of `messages` is one the recording saw (the same object), so recorded
    with its id: 0 for a history it never saw, or one that changed. One identity check of the prefix (the
    recording's cursor, not moved): a plain call looks for merged requests (new objects pydantic-ai builds) among
    the new messages only, not the whole history."""
    cursor = _recorded.find(store, messages)
    return cursor.seen_prefix(messages) if cursor is not None else 0


async def record_new_messages(
    state: RunState, messages: Sequence[ModelMessage], store: HistoryStore | None
) -> list[ModelMessage]:
    """Give every new message its stable id and append it to the store, and append a new version of every
    recorded message edited in place (same id, new content), unless the edit only reduces the working context
    (`REDUCTION_METADATA_KEYS`). Returns what was handed to the store. O(new messages)."""
    return (await record_and_count(state, messages, store, None))[0]


async def record_and_count(
    state: RunState, messages: Sequence[ModelMessage], store: HistoryStore | None, counter: IncrementalCounter | None
) -> tuple[list[ModelMessage], int | None]:
    """`record_new_messages`, and the count of `messages` by `counter` from the same history check (the
    recording's cursor keeps the counts): one check of the whole history per request instead of two."""
    cursor = _recorded.cursor_for(store, messages)
    change = cursor.peek(messages)
    if change.kind == "replaced" and _adopt_ids(cursor.messages, messages, change.start):
        change = cursor.peek(messages)
    if change.kind == "unchanged":
        return [], _count(counter, cursor, messages, change)
    new = [
        m
        for m in messages[change.start :]
        if (message_id := get_message_id(m)) is None or (store is not None and message_id not in store)
    ]
    ensure_message_ids(new)
    edited = [messages[i] for i in change.edited]
    versions = [m for m in edited if store is not None and await _is_new_version(store, m)]
    if store is not None and (new or versions):
        await store.append([*versions, *new])
    tokens = _count(counter, cursor, messages, change)
    cursor.commit(messages, change)  # only once recorded: a failed append is tried again at the next call
    return [*versions, *new], tokens


def _count(
    counter: IncrementalCounter | None, cursor: _Tally, messages: Sequence[ModelMessage], change: HistoryChange
) -> int | None:
    if counter is None:
        return None
    return counter._count_change(cursor, messages, change)  # pyright: ignore[reportPrivateUsage]


def _adopt_ids(recorded: Sequence[ModelMessage], messages: Sequence[ModelMessage], start: int) -> bool:
    """Give a message without an id the id of the recorded message at its position when the two differ only in
    their metadata: the same message, rebuilt (`run_stream` hands out a fresh copy of its final response, without
    the id given to the response the run committed). Returns whether any id was adopted."""
    adopted = False
    for i in range(start, min(len(recorded), len(messages))):
        new, old = messages[i], recorded[i]
        old_id = get_message_id(old)
        if old_id is None or get_message_id(new) is not None or not _same_but_metadata(new, old):
            continue
        new.metadata = {**(new.metadata or {}), **(old.metadata or {}), MESSAGE_ID_KEY: old_id}
        adopted = True
    return adopted


def _same_but_metadata(a: ModelMessage, b: ModelMessage) -> bool:
    if type(a) is not type(b):
        return False
    return all(getattr(a, f.name) == getattr(b, f.name) for f in fields(a) if f.name != "metadata")


async def _is_new_version(store: HistoryStore, message: ModelMessage) -> bool:
    """Whether an edited message differs from its recorded version by more than working-context reductions."""
    message_id = get_message_id(message)
    if message_id is None or message_id not in store:
        return True
    recorded = (await store.read(message_id, message_id, limit=1)).messages
    if not recorded:
        return True
    old = recorded[-1]
    if len(old.parts) != len(message.parts) or type(old) is not type(message):
        return True
    clamped = clamped_part_indices(message) - clamped_part_indices(old)
    return any(
        a != b and j not in clamped and not is_reduction(a, b)
        for j, (a, b) in enumerate(zip(old.parts, message.parts, strict=True))
    )


def is_reduction(old: object, new: object) -> bool:
    """`new` is `old` cleared or evicted by the toolkit (a marker the old part did not have)."""
    old_metadata: object = getattr(old, "metadata", None)
    new_metadata: object = getattr(new, "metadata", None)
    if type(old) is not type(new) or not isinstance(new_metadata, dict):
        return False
    before = cast("dict[str, object]", old_metadata) if isinstance(old_metadata, dict) else {}
    return any(key in new_metadata and key not in before for key in REDUCTION_METADATA_KEYS)


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
