"""The `HistoryStore` protocol: where every message of a conversation is kept, verbatim, forever."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic_ai.messages import ModelMessage

from .._messages import MESSAGE_ID_KEY, get_message_id

__all__ = [
    "HistoryPage",
    "HistoryStore",
    "HistoryStoreError",
    "HistoryStoreLockedError",
    "InvalidSessionIdError",
    "ensure_message_id",
    "ensure_message_ids",
    "new_message_id",
    "validate_session_id",
]


class HistoryStoreError(RuntimeError):
    """A history store cannot do what was asked (bad id, unreadable file, missing message id)."""


class HistoryStoreLockedError(HistoryStoreError):
    """Another process is writing the same history file."""


class InvalidSessionIdError(HistoryStoreError, ValueError):
    """A session id that cannot name a file or folder safely."""


_MAX_SESSION_ID_BYTES = 255


def validate_session_id(session_id: object) -> str:
    """`session_id` if it can safely name one file or folder, else `InvalidSessionIdError` saying why.

    A session id is one path component: not empty, not `.` or `..`, no `/` or `\\`, no NUL or other control
    character, at most 255 bytes in UTF-8 (the file-name limit of common file systems).
    """
    if not isinstance(session_id, str):
        raise InvalidSessionIdError(f"a session id must be a string, got {type(session_id).__name__}")
    problem = _session_id_problem(session_id)
    if problem:
        raise InvalidSessionIdError(f"invalid session id {session_id[:80]!r}: {problem}")
    return session_id


def _session_id_problem(session_id: str) -> str | None:
    if not session_id:
        return "it is empty"
    if session_id in (".", ".."):
        return "'.' and '..' name directories, not sessions"
    if "/" in session_id or "\\" in session_id:
        return "it contains a path separator; use letters, digits, '-', '_' or '.'"
    if any(ord(c) < 32 or ord(c) == 127 for c in session_id):
        return "it contains NUL or another control character"
    try:
        size = len(session_id.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid Unicode (lone surrogate)"
    if size > _MAX_SESSION_ID_BYTES:
        return f"it is {size} bytes long in UTF-8; the limit is {_MAX_SESSION_ID_BYTES}"
    return None


@dataclass(frozen=True)
class HistoryPage:
    """One page of original messages from [`HistoryStore.read`][summarization_pydantic_ai.HistoryStore.read]."""

    messages: list[ModelMessage]
    total: int
    """How many messages the requested span holds in all."""
    offset: int
    next_offset: int | None
    """Pass as `offset` to read the next page; `None` on the last page."""


def new_message_id() -> str:
    """24 lowercase hex digits: 96 random bits (as `uuid4().hex[:24]` gave, at a fifth of the cost: a compaction
    of a 10,000-message history assigns 10,000 of them)."""
    return os.urandom(12).hex()


def ensure_message_id(message: ModelMessage) -> str:
    """The message's stable id, assigned (in its `metadata`, under `MESSAGE_ID_KEY`) if it has none yet.

    Ids are assigned when a message is first seen, before it is sent or committed, so the one metadata
    assignment never changes something a provider or an instrumentation span already saw.
    """
    existing = get_message_id(message)
    if existing:
        return existing
    message_id = new_message_id()
    message.metadata = {**(message.metadata or {}), MESSAGE_ID_KEY: message_id}
    return message_id


def ensure_message_ids(messages: Sequence[ModelMessage]) -> None:
    """`ensure_message_id` for every message, the random bits of the missing ids drawn at once (one system call
    instead of one per message: a first record of a 10,000-message history assigns 10,000 ids)."""
    missing = [m for m in messages if not get_message_id(m)]
    if not missing:
        return
    digits = os.urandom(12 * len(missing)).hex()
    for k, message in enumerate(missing):
        message.metadata = {**(message.metadata or {}), MESSAGE_ID_KEY: digits[24 * k : 24 * k + 24]}


@runtime_checkable
class HistoryStore(Protocol):
    """The full, uncompressed history of one conversation, keyed by stable message ids.

    Every message is recorded once, in order; summaries are records too (their metadata lists the ids they
    replaced). A message edited in place (same id, new content) is recorded again as a new version; reading
    returns the latest version at the place of the first. `load()` returns the working context to resume from;
    `read()` returns originals verbatim.
    """

    @property
    def path(self) -> Path | None: ...

    async def append(self, messages: Sequence[ModelMessage]) -> int:
        """Record the messages not recorded yet, and a new version of each recorded one whose content changed
        (each must carry an id); returns how many records were written."""
        ...

    def __contains__(self, message_id: object) -> bool: ...

    async def load(self) -> list[ModelMessage]:
        """The working context: the latest summary with what it kept, plus every message after it."""
        ...

    async def load_all(self) -> list[ModelMessage]:
        """Every record, in order (messages and summaries)."""
        ...

    async def read(
        self, start_id: str | None = None, end_id: str | None = None, *, offset: int = 0, limit: int = 50
    ) -> HistoryPage:
        """The original messages from `start_id` to `end_id` (inclusive, in recorded order), paged."""
        ...

    def size_bytes(self) -> int: ...

    def __len__(self) -> int: ...
