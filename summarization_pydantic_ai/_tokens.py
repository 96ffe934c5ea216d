"""Token accounting: approximate, usage-anchored, tokenizer-based and provider counters.

Every counter is a callable `messages -> int` (sync) or `messages -> Awaitable[int]` (async); the processors
accept both. Counters built on a per-message estimate (`IncrementalCounter`)
cache each message's count and the running total of the history they saw last, so a call on a history that
grew by k messages costs O(k), not O(n).
"""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic_ai.messages import ModelMessage

from ._cursor import CursorTable, HistoryChange, HistoryCursor
from ._estimate import (
    AUDIO_TOKENS,
    CHARS_PER_TOKEN,
    DOCUMENT_TOKENS,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    PART_OVERHEAD_TOKENS,
    VIDEO_TOKENS,
    approx_message_tokens,
    approx_messages_tokens,
    estimate_message_tokens,
    estimate_text_tokens,
)

__all__ = [
    "AUDIO_TOKENS",
    "CHARS_PER_TOKEN",
    "DOCUMENT_TOKENS",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "PART_OVERHEAD_TOKENS",
    "VIDEO_TOKENS",
    "IncrementalCounter",
    "RequestAwareCounter",
    "RequestInfo",
    "TokenCounter",
    "async_count_tokens",
    "count_tokens_approximately",
    "estimate_message_tokens",
    "estimate_text_tokens",
]

logger = logging.getLogger("summarization_pydantic_ai")

TokenCounter = Callable[[Sequence[ModelMessage]], int | Awaitable[int]]
"""A sync or async callable that counts the tokens of a list of messages."""


class _MessageCache:
    """Per-message results keyed by identity; an entry goes away with its message."""

    def __init__(self) -> None:
        self._values: dict[int, int] = {}
        self._lock = threading.Lock()

    def get_or_compute(self, message: ModelMessage, compute: Callable[[ModelMessage], int]) -> int:
        key = id(message)
        value = self._values.get(key)
        if value is not None:
            return value
        value = compute(message)
        with self._lock:
            if key not in self._values:
                weakref.finalize(message, self._values.pop, key, None)
            self._values[key] = value
        return value

    def discard(self, message: ModelMessage) -> None:
        """Forget one message's result (it was edited in place)."""
        with self._lock:
            self._values.pop(id(message), None)

    def __len__(self) -> int:
        return len(self._values)


_MAX_STATES = 32


class _Tally(HistoryCursor):
    """A cursor that also keeps each message's count and the total of the history it was advanced to."""

    __slots__ = ("counter", "counts", "total")

    def __init__(self, *, fingerprint_all: bool = False) -> None:
        super().__init__(fingerprint_all=fingerprint_all)
        self.counts: list[int] = []
        self.total = 0
        self.counter: object = None
        """The counter whose counts these are (a cursor of another consumer: see `_count_change`)."""


@dataclass(eq=False)
class IncrementalCounter:
    """A counter built from a per-message estimate that re-measures only what changed since its previous call.

    For each history it saw (up to 32, told apart by their first message) it keeps a
    [`HistoryCursor`][summarization_pydantic_ai.HistoryCursor] and every message's count. The cursor says exactly
    what changed (the identity of the whole prefix is compared, at memory speed): a history that grew by k
    messages costs O(k); a message edited in place is re-measured (its old count subtracted, the new one added);
    a history replaced from index i (a compaction, a rewind) is re-measured from i. `count(..., verify=True)`
    also checks every message, not only the last few, for in-place mutation of the same object (the processors
    do it when an estimate comes near a trigger). A history seen the first time is measured without keeping a
    fingerprint of each message (what the in-place check compares): the first count of a long history, e.g.
    one just loaded from a store, costs its measurement only, and the first `verify=True` measures it again.

    Example:
        ```python
        counter = IncrementalCounter(estimate_message_tokens)
        counter(messages)  # O(n) the first time
        counter(messages + new)  # O(len(new))
        ```
    """

    message_tokens: Callable[[ModelMessage], int] = estimate_message_tokens
    _cache: _MessageCache = field(default_factory=_MessageCache, init=False, repr=False)
    _tallies: CursorTable[_Tally] = field(
        default_factory=lambda: CursorTable(_MAX_STATES, factory=_Tally), init=False, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        # The default estimate has a faster form that gives the same counts (and a batch form of it).
        default = self.message_tokens is estimate_message_tokens
        self._measure = approx_message_tokens if default else self.message_tokens
        self._measure_all: Callable[[Sequence[ModelMessage]], list[int]] = (
            approx_messages_tokens if default else lambda messages: list(map(self._measure, messages))
        )

    def __call__(self, messages: Sequence[ModelMessage]) -> int:
        return self.count(messages)

    def count_message(self, message: ModelMessage) -> int:
        """One message's count (cached by identity)."""
        return self._cache.get_or_compute(message, self._measure)

    def count(self, messages: Sequence[ModelMessage], *, verify: bool = False) -> int:
        if not messages:
            return 0
        with self._lock:
            tally = self._tallies.cursor_for(messages)
            change = tally.peek(messages, verify=verify)
            if change.kind != "unchanged":
                self._apply(tally, messages, change)
                tally.commit(messages, change)
            return tally.total

    def _count_change(self, tally: _Tally, messages: Sequence[ModelMessage], change: HistoryChange) -> int:
        """The count of `messages`, for a consumer that checks the history with its own `tally` cursor anyway
        (the middleware's recording): `change` is what that cursor reported and is about to commit, so one
        history check serves both. Counts kept on `tally` by another counter are measured again."""
        with self._lock:
            if tally.counter is not self or len(tally.counts) != len(tally):
                # Counts this counter keeps for the same messages (e.g. a history a store measured as it loaded
                # it: `HistoryStore.load()`) serve the prefix they share: the very objects, in order.
                known = self._tallies.find(messages)
                common = known.seen_prefix(messages) if known is not None and len(known.counts) == len(known) else 0
                measured = self._measure_all(messages[common:] if common else messages)
                tally.counts = [*known.counts[:common], *measured] if known is not None and common else measured
                tally.total, tally.counter = sum(tally.counts), self
            elif change.kind != "unchanged":
                self._apply(tally, messages, change)
            return tally.total

    def _apply(self, tally: _Tally, messages: Sequence[ModelMessage], change: HistoryChange) -> None:
        """Bring `tally`'s counts and total from its last history to `messages`, given their `change`."""
        measure = self._measure
        counts = tally.counts
        edited = [(i, measure(messages[i])) for i in change.edited]  # measured first: a failure changes nothing
        added = self._measure_all(messages[change.start :])
        if change.kind == "replaced":
            del counts[change.start :]
            total = sum(counts)
        else:
            total = tally.total
            for i, new in edited:  # same id, new content: the old count out, the new one in
                self._cache.discard(messages[i])
                total += new - counts[i]
                counts[i] = new
        counts.extend(added)
        tally.total = total + sum(added)

    def invalidate(self) -> None:
        """Forget the histories seen (per-message results stay valid)."""
        with self._lock:
            self._tallies.clear()


_default_counter = IncrementalCounter()


def count_tokens_approximately(messages: Sequence[ModelMessage]) -> int:
    """Approximate the tokens of `messages` (about 4 characters per token, media at fixed estimates).

    Counts every part kind: system prompts, rendered instructions, user text and list content
    (`BinaryContent`/`ImageUrl`/audio/video/documents at fixed estimates), thinking, tool calls (name and args)
    and tool returns (strings, dicts, lists), retries and summaries. Cached per message and per prefix: a
    history that grew by k messages since the previous call costs O(k).
    """
    return _default_counter.count(messages)


async def async_count_tokens(counter: TokenCounter, messages: Sequence[ModelMessage]) -> int:
    """Call a sync or async counter and return an `int`, with a clear error for anything else."""
    result: Any = counter(messages)
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, bool) or not isinstance(result, int):
        raise TypeError(f"token counter {counter!r} returned {type(result).__name__}, expected int")
    if result < 0:
        raise ValueError(f"token counter {counter!r} returned a negative count ({result})")
    return result


@dataclass
class RequestInfo:
    """What a capability knows about the request being prepared, for counters that can use it."""

    model: Any = None
    model_settings: Any = None
    model_request_parameters: Any = None
    overhead_tokens: int = 0
    """Instructions and tool definitions of the request, estimated."""


@runtime_checkable
class RequestAwareCounter(Protocol):
    """A counter that measures a whole request (messages plus instructions and tools) itself.

    `threshold` is the token count at which the caller will act; counters may spend more effort (a provider
    call) only near it.
    """

    async def count_request(
        self, messages: Sequence[ModelMessage], *, request: RequestInfo, threshold: int | None
    ) -> int: ...
