"""The pieces of a history's search index below `SessionIndex`: what it returns (`Hit`, `Pending`,
`IndexDiscardedError`) and how it handles its files (one lock per index file in a process, the WAL switch, telling
corruption from other errors, the digest of the history's bytes before an offset)."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from summarization_pydantic_ai.store import StoredRecord

__all__ = [
    "BUSY_TIMEOUT_S",
    "Hit",
    "IndexDiscardedError",
    "Pending",
    "file_lock",
    "is_corruption",
    "set_wal",
    "tail_digests",
]

_TAIL = 256
"""Bytes before `next_offset` whose digest is kept: a rewritten file is noticed even when its length grew."""
BUSY_TIMEOUT_S = 60.0

_FILE_LOCKS: dict[Path, threading.RLock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


def file_lock(index_path: Path) -> threading.RLock:
    """The lock of one index file, shared by every `SessionIndex` on it in this process."""
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(index_path, threading.RLock())


@dataclass(frozen=True)
class Hit:
    message_id: str
    position: int
    roles: str
    tool_names: str
    timestamp: str
    body: str
    score: float
    session: str = ""


class IndexDiscardedError(RuntimeError):
    """The index file was corrupt and has been removed: update it again (it is rebuilt from the history)."""


@dataclass(frozen=True)
class Pending:
    """Records read from the history, not yet indexed, and the index state they continue from."""

    records: list[StoredRecord]
    next_offset: int
    first_message_id: str | None
    tail: str
    """Digest of the bytes just before `next_offset`."""
    expected: tuple[str, str, str]
    """The stored (offset, first id, tail) these records follow; `reset` when the index must start over."""
    reset: bool

    @property
    def empty(self) -> bool:
        return not self.records and not self.reset


def tail_digests(path: Path, ends: Sequence[int]) -> list[str | None]:
    """Digest of the `_TAIL` bytes before each of `ends` (one open); `None` where the file is missing or shorter."""
    digests: list[str | None] = []
    try:
        with path.open("rb") as handle:
            for end in ends:
                if digests and end == ends[0]:
                    digests.append(digests[0])
                    continue
                start = max(0, end - _TAIL)
                handle.seek(start)
                data = handle.read(end - start)
                digests.append(hashlib.blake2b(data, digest_size=16).hexdigest() if len(data) == end - start else None)
    except FileNotFoundError:
        return [None] * len(ends)
    return digests


def is_corruption(exc: sqlite3.DatabaseError) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "malformed" in text or "not a database" in text or "corrupt" in text
    return True


def set_wal(db: sqlite3.Connection) -> None:
    """Switch to WAL. Two processes opening a fresh index at once: the switch needs the database to itself, and
    SQLite answers "database is locked" at once (the busy timeout does not apply there), so try again briefly."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
