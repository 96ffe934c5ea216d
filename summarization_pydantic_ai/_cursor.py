"""One answer to "what changed in this history since I last looked at it?".

Token counters, the middleware's recording, eviction and the history search each need to know which part of a
history they have already handled. `HistoryCursor` answers it for all of them, exactly and cheaply: it keeps a
reference to every message it has seen and says, for the next history, exactly one of

- **unchanged**: the same messages, in the same order;
- **appended**: the same messages followed by `appended` new ones (cost O(new messages));
- **edited**: some messages were edited in place (same message id, new content; e.g. `dataclasses.replace`),
  possibly with new messages after them;
- **replaced**: everything from index `start` on is different (a compaction, a rewind, another history).

The prefix is compared by object identity over the whole history, at memory speed (one `memcmp` of the two
lists' item arrays in place on CPython, nothing copied: about 10 µs for 50,000 messages), so an edit anywhere is
noticed, not just in a sample. Remembering a grown history costs O(new messages). A message object mutated in
place (its parts list or a part's content reassigned, no new object) is noticed in the last `tail` messages on
every call and anywhere with `verify=True`.

Example:
    ```python
    cursor = HistoryCursor()
    cursor.advance(messages)          # HistoryChange(kind='replaced', start=0, ...): all new the first time
    messages.append(response)
    change = cursor.advance(messages)  # kind='appended', start=len(messages) - 1, appended=1
    ```
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import is_
from typing import Any, Generic, Literal, overload

from pydantic_ai.messages import ModelMessage
from typing_extensions import TypeVar

from ._list_items import FAST as _FAST
from ._list_items import ITEMS_OFFSET as _ITEMS_OFFSET
from ._list_items import POINTER as _POINTER
from ._list_items import is_plain_list as _is_plain_list
from ._list_items import memcmp as _memcmp
from ._list_items import pointer_at as _pointer_at
from ._messages import get_message_id

__all__ = ["CursorTable", "HistoryChange", "HistoryCursor"]

ChangeKind = Literal["unchanged", "appended", "edited", "replaced"]

_TAIL = 8
"""How many of the last seen messages are checked for in-place mutation (same object, new content) on every call."""


@dataclass(frozen=True)
class HistoryChange:
    """What happened to a history since the cursor last saw it."""

    kind: ChangeKind
    start: int
    """The index of the first message not seen before: the previous length for `unchanged`, `appended` and
    `edited`, the first index that differs for `replaced` (0 the first time)."""
    length: int
    """The length of the history now."""
    edited: tuple[int, ...] = ()
    """Indices of the messages edited in place (`edited` only), in order."""

    @property
    def appended(self) -> int:
        """How many messages are new at the end (for `replaced`: everything from `start`)."""
        return self.length - self.start

    @property
    def is_append_only(self) -> bool:
        """Nothing seen before changed: the history is unchanged or only grew at the end."""
        return self.kind in ("unchanged", "appended")


def _change(kind: ChangeKind, start: int, length: int, edited: tuple[int, ...] = ()) -> HistoryChange:
    """A `HistoryChange`, made without the frozen dataclass's `__init__` (one `object.__setattr__` per field):
    this runs on every call of every consumer."""
    change = object.__new__(HistoryChange)
    change.__dict__.update(kind=kind, start=start, length=length, edited=edited)
    return change


_Fingerprint = tuple[object, ...]


def _fingerprint(message: ModelMessage) -> _Fingerprint:
    """The objects a message is made of: its parts list, each part and each part's content or arguments.

    Holding them (not their `id`s) keeps them alive, so an identity comparison later cannot be fooled by a
    reused address. Reassigning a part's content or editing the parts list changes the fingerprint.
    Messages of one or two parts (most of them) are spelled out: this runs for every new message and for the
    checked tail on every call."""
    parts = message.parts
    count = len(parts)
    if count == 1:
        (a,) = parts
        return (parts, 1, message.metadata, a, getattr(a, "content", None), getattr(a, "args", None))
    if count == 2:
        a, b = parts
        return (
            parts,
            2,
            message.metadata,
            a,
            getattr(a, "content", None),
            getattr(a, "args", None),
            b,
            getattr(b, "content", None),
            getattr(b, "args", None),
        )
    items: list[object] = [parts, count, message.metadata]
    for part in parts:
        items += (part, getattr(part, "content", None), getattr(part, "args", None))
    return tuple(items)


def _same_fingerprint(a: _Fingerprint, b: _Fingerprint | None) -> bool:
    """Nothing observable changed: the same objects, or (where an object was swapped) an equal one. Tuple
    equality checks identity first, item by item, in C; only a swapped object is compared by value."""
    return a == b


class HistoryCursor:
    """Remembers the last history it was advanced to; see the module docstring. Not thread-safe: keep one per
    consumer and history (a `CursorTable` keys them by the history's first message).

    `fingerprint_all=False` keeps the fingerprints of the last few messages only (those the tail check reads),
    so seeing a long history for the first time costs O(1) per message instead of a fingerprint each: for
    consumers that never ask for `verify=True`. A message without a fingerprint that has to be checked (a
    history that shrank, or `verify=True`) is reported as edited: looked at again, never silently trusted.
    """

    __slots__ = ("_fingerprint_all", "_fingerprints", "_items_of", "_refs", "_refs_items", "_seen_any")

    _fingerprint_of: Callable[[ModelMessage], _Fingerprint] = staticmethod(_fingerprint)
    """What an in-place mutation is judged by. A consumer that reads only some messages may look at less: a
    subclass can return one constant for the messages it never reads (an in-place edit of one of those then
    needs no new visit)."""

    def __init__(self, *, fingerprint_all: bool = True) -> None:
        self._seen_any = False
        self._fingerprint_all = fingerprint_all
        self._fingerprints: list[_Fingerprint | None] = []
        self._set_refs([])
        self._items_of: tuple[int, ctypes.c_void_p | None] = (0, None)
        """(id of the list last compared, a view of its item-array pointer): a list at that address is read
        through the same view (it reads the pointer where it is now), so the view is made once per list."""

    def _set_refs(self, refs: list[ModelMessage]) -> None:
        self._refs = refs
        # A view of the refs list's item-array pointer (it follows reallocation: read at each comparison).
        self._refs_items = _pointer_at(id(refs) + _ITEMS_OFFSET) if _FAST else None

    def __len__(self) -> int:
        return len(self._refs)

    @property
    def messages(self) -> Sequence[ModelMessage]:
        """The history the cursor was last advanced to (read-only view; do not modify)."""
        return self._refs

    def reset(self) -> None:
        """Forget everything: the next history is `replaced` from 0."""
        self._fingerprints, self._seen_any = [], False
        self._set_refs([])

    def peek(self, messages: Sequence[ModelMessage], *, verify: bool = False) -> HistoryChange:
        """Classify `messages` against the last history without moving the cursor.

        `verify=True` also checks every message (not only the last few) for in-place mutation of the same object.
        """
        seen, n = len(self._refs), len(messages)
        if not self._seen_any:
            return _change("replaced", 0, n)
        common = min(seen, n)
        if self._prefix_identical(messages, common):
            edited = self._mutated(messages, 0 if verify else max(0, common - _TAIL), common)
            if n < seen:
                first = edited[0] if edited else n
                return _change("replaced", first, n)
            if edited:
                return _change("edited", seen, n, edited)
            return _change("appended" if n > seen else "unchanged", seen, n)
        return self._classify_slow(messages, common, verify)

    def seen_prefix(self, messages: Sequence[ModelMessage]) -> int:
        """How many leading messages of `messages` are the very objects last seen, in order: all those the two
        histories have in common, or 0 when any of them differs (nothing finer is promised). Identity only (no
        fingerprint: a message mutated in place counts as seen), so cheaper than `peek`."""
        common = min(len(self._refs), len(messages))
        return common if self._seen_any and self._prefix_identical(messages, common) else 0

    def advance(self, messages: Sequence[ModelMessage], *, verify: bool = False) -> HistoryChange:
        """Classify `messages` (as `peek`) and remember them as the last history."""
        change = self.peek(messages, verify=verify)
        self.commit(messages, change)
        return change

    def commit(self, messages: Sequence[ModelMessage], change: HistoryChange) -> None:
        """Remember `messages` as the last history, given the `change` that `peek` reported for them."""
        self._seen_any = True
        kind = change.kind
        if kind == "unchanged":
            return
        if kind == "appended" and (self._fingerprint_all or change.appended <= _TAIL):
            # The usual case: nothing to drop or replace, every new message gets its fingerprint.
            new = messages[change.start :]
            self._refs += new
            self._fingerprints += map(self._fingerprint_of, new)
            return
        keep = change.start if kind == "replaced" else len(self._refs)
        del self._refs[keep:]
        del self._fingerprints[keep:]
        for i in change.edited:
            self._refs[i] = messages[i]
            self._fingerprints[i] = self._fingerprint_of(messages[i])
        new = list(messages[keep:])
        self._refs.extend(new)
        # Without `fingerprint_all`, only the new messages that end up in the checked tail get one.
        untracked = 0 if self._fingerprint_all else max(0, min(len(new), len(self._refs) - _TAIL - keep))
        if untracked:
            self._fingerprints.extend([None] * untracked)
            new = new[untracked:]
        self._fingerprints.extend(map(self._fingerprint_of, new))

    def _prefix_identical(self, messages: Sequence[ModelMessage], common: int) -> bool:
        if not common:
            return True
        if self._refs_items is not None and _is_plain_list(messages):
            if common > len(messages) or common > len(self._refs):
                return False
            key, items = self._items_of
            if key != id(messages) or items is None:
                items = _pointer_at(id(messages) + _ITEMS_OFFSET)
                self._items_of = (id(messages), items)
            assert _memcmp is not None
            return _memcmp(items, self._refs_items, common * _POINTER) == 0
        return all(map(is_, messages[:common], self._refs))

    def _mutated(self, messages: Sequence[ModelMessage], start: int, stop: int) -> tuple[int, ...]:
        fingerprints = self._fingerprints
        now = list(map(self._fingerprint_of, messages[start:stop]))
        # One list comparison in C (identity first, item by item) when nothing changed, the usual case.
        # A missing fingerprint (`fingerprint_all=False`) compares unequal: the message is looked at again.
        if now == fingerprints[start:stop]:
            return ()
        return tuple([start + k for k, fingerprint in enumerate(now) if fingerprint != fingerprints[start + k]])

    def _classify_slow(self, messages: Sequence[ModelMessage], common: int, verify: bool) -> HistoryChange:
        """Some message in the common prefix is a different object: find out which and why."""
        refs, fingerprints, fingerprint_of = self._refs, self._fingerprints, self._fingerprint_of
        seen, n = len(refs), len(messages)
        tail_from = 0 if verify else max(0, common - _TAIL)
        edited: list[int] = []
        for i in range(common):
            new, old = messages[i], refs[i]
            if new is old:
                if i >= tail_from and not _same_fingerprint(fingerprint_of(new), fingerprints[i]):
                    edited.append(i)
                continue
            old_id = get_message_id(old)
            if old_id is None or get_message_id(new) != old_id:
                return _change("replaced", edited[0] if edited else i, n)  # id changed: a new history
            if not _same_fingerprint(fingerprint_of(new), fingerprints[i]) and new != old:
                edited.append(i)
            else:  # an equal copy: nothing to report, but remember the new object
                refs[i], fingerprints[i] = new, fingerprint_of(new)
        if n < seen:
            return _change("replaced", edited[0] if edited else n, n)
        if not edited:
            return _change("appended" if n > seen else "unchanged", seen, n)
        return _change("edited", seen, n, tuple(edited))


_C = TypeVar("_C", bound=HistoryCursor, default=HistoryCursor)


class CursorTable(Generic[_C]):
    """Cursors for several histories at once, keyed by the identity of each history's first message (bounded LRU).

    A consumer that is handed many histories (one per run, or copies of several sessions) keeps one table; the
    cursor of a history is found again as long as its first message is the same object, or an edited copy of it
    (the same message id). Not thread-safe.
    `factory` makes the cursors (a `HistoryCursor` subclass that carries the consumer's own per-history state,
    e.g. a running total).
    """

    __slots__ = ("_cursors", "_factory", "max_size")

    @overload
    def __init__(self: CursorTable[HistoryCursor], max_size: int = 32) -> None: ...
    @overload
    def __init__(self, max_size: int = 32, *, factory: Callable[[], _C]) -> None: ...
    def __init__(self, max_size: int = 32, *, factory: Callable[[], Any] = HistoryCursor) -> None:
        self.max_size = max_size
        self._factory: Callable[[], _C] = factory
        self._cursors: dict[int, _C] = {}

    def __len__(self) -> int:
        return len(self._cursors)

    def cursor_for(self, messages: Sequence[ModelMessage]) -> _C:
        """The cursor of the history starting with `messages[0]` (a fresh one for a new or empty history)."""
        if not messages:
            return self._factory()
        first = messages[0]
        key = id(first)
        cursor = self._cursors.pop(key, None)
        if cursor is None or not cursor.messages or cursor.messages[0] is not first:
            cursor = self._by_message_id(first) or self._factory()
        self._cursors[key] = cursor  # most recently used last
        while len(self._cursors) > self.max_size:
            self._cursors.pop(next(iter(self._cursors)))
        return cursor

    def find(self, messages: Sequence[ModelMessage]) -> _C | None:
        """The cursor of the history starting with the very object `messages[0]`, if the table has one; unlike
        `cursor_for`, the table is left as it is (no recency update, no cursor made or moved)."""
        if not messages:
            return None
        cursor = self._cursors.get(id(messages[0]))
        return cursor if cursor is not None and cursor.messages and cursor.messages[0] is messages[0] else None

    def _by_message_id(self, first: ModelMessage) -> _C | None:
        """The cursor of a history whose first message was replaced by an edited copy (same message id)."""
        message_id = get_message_id(first)
        if message_id is None:
            return None
        for key, cursor in self._cursors.items():
            if cursor.messages and get_message_id(cursor.messages[0]) == message_id:
                del self._cursors[key]
                return cursor
        return None

    def clear(self) -> None:
        self._cursors.clear()
