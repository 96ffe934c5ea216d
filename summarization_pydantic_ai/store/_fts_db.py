"""The SQLite file of a history's search index (`messages.json.index.sqlite`): schema, opening, corruption.

The index is derived data: a corrupt or outdated file is removed and rebuilt from the history. One lock per index
file is shared by every index object on it in a process; across processes SQLite's write transaction serializes
updates.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._scan_search import normalized_words
from ._search_text import message_filters

__all__ = [
    "BUSY_TIMEOUT_S",
    "VERSION",
    "clear",
    "connect",
    "file_lock",
    "is_corruption",
    "remove_files",
    "tail_digests",
]

VERSION = "3"
"""3: the searchable words are the scan's normalized words; the added search text is kept apart from the body."""
BUSY_TIMEOUT_S = 60.0
TAIL = 256
"""Bytes before the indexed offset whose digest is kept: a rewritten file is noticed even when its length grew."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs(
    rowid INTEGER PRIMARY KEY, message_id TEXT NOT NULL UNIQUE, position INTEGER NOT NULL, roles TEXT NOT NULL,
    tool_names TEXT NOT NULL, ts TEXT NOT NULL, body TEXT NOT NULL, extra TEXT NOT NULL DEFAULT ''
);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(words, tokenize='unicode61 remove_diacritics 2');
"""
_META = ("offset", "positions", "first_id", "tail", "texts")

_FILE_LOCKS: dict[Path, threading.RLock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


def file_lock(index_path: Path) -> threading.RLock:
    """The lock of one index file, shared by every index object on it in this process."""
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(index_path, threading.RLock())


def tail_digests(path: Path, ends: Sequence[int]) -> list[str | None]:
    """Digest of the `TAIL` bytes before each of `ends` (one open); `None` where the file is missing or shorter."""
    digests: list[str | None] = []
    try:
        with path.open("rb") as handle:
            for end in ends:
                if digests and end == ends[0]:
                    digests.append(digests[0])
                    continue
                start = max(0, end - TAIL)
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


def _set_wal(db: sqlite3.Connection) -> None:
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


def meta(db: sqlite3.Connection, key: str) -> str | None:
    try:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return str(row[0]) if row else None


def connect(index_path: Path) -> sqlite3.Connection:
    """An open, checked index of this version (created, or recreated from an older version's, when needed)."""
    db = sqlite3.connect(index_path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    try:
        _set_wal(db)
        db.execute("PRAGMA synchronous=OFF")  # the index can always be rebuilt from messages.json
        check = db.execute("PRAGMA quick_check(1)").fetchone()  # once per connection: ~25 ms for 10k messages
        if not check or check[0] != "ok":
            raise sqlite3.DatabaseError(f"corrupt index: {check[0] if check else 'no answer'}")
        if meta(db, "version") != VERSION:
            _recreate(db)
    except BaseException:
        db.close()
        raise
    return db


def _recreate(db: sqlite3.Connection) -> None:
    """An empty index of this version (tables of an older one are dropped)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if meta(db, "version") != VERSION:  # another process may have done it meanwhile
            for table in ("docs", "docs_fts", "meta"):
                db.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in filter(str.strip, _SCHEMA.split(";")):
                db.execute(statement)
            clear(db)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def clear(db: sqlite3.Connection) -> None:
    """Empty the index (inside the caller's transaction): it starts over from the history's first record."""
    db.execute("DELETE FROM docs")
    db.execute("DELETE FROM docs_fts")
    db.execute("DELETE FROM meta")
    db.executemany(
        "INSERT INTO meta(key, value) VALUES (?, ?)",
        [("version", VERSION), *((key, "0" if key in ("offset", "positions") else "") for key in _META)],
    )


def remove_files(index_path: Path, db: sqlite3.Connection | None) -> None:
    if db is not None:
        with contextlib.suppress(sqlite3.Error):
            db.close()
    for suffix in ("", "-wal", "-shm", "-journal"):
        index_path.with_name(index_path.name + suffix).unlink(missing_ok=True)


def stamp(path: Path) -> str:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return ""
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def with_extra(body: str, extra: str) -> str:
    """A message's text as the scan searches it: the rendered message, then its added search text."""
    return body + (f"\n{extra}" if extra else "")


def index_words(db: sqlite3.Connection, rowid: Any, body: str, extra: str) -> None:
    """The row's searchable words: the scan's normalized words of its text, so both find the same messages."""
    words = " ".join(normalized_words(with_extra(body, extra)))
    db.execute("INSERT INTO docs_fts(rowid, words) VALUES (?, ?)", (rowid, words))


def apply_texts(db: sqlite3.Connection, texts: dict[str, str]) -> int:
    """Index again the rows whose added search text changed (`add_search_text` after the message was indexed)."""
    written = 0
    for message_id, extra in texts.items():
        row = db.execute("SELECT rowid, body, extra FROM docs WHERE message_id = ?", (message_id,)).fetchone()
        if row is None or row[2] == extra:
            continue  # not indexed yet (it will be with its text), or unchanged
        db.execute("UPDATE docs SET extra = ? WHERE rowid = ?", (extra, row[0]))
        db.execute("DELETE FROM docs_fts WHERE rowid = ?", (row[0],))
        index_words(db, row[0], str(row[1]), extra)
        written += 1
    return written


def filters(
    fts_query: str, roles: Sequence[str], tool_name: str | None, since: str | None, until: str | None
) -> tuple[list[str], list[Any]]:
    where, params = message_filters("d", roles, tool_name, since, until)
    return ["docs_fts MATCH ?", *where], [fts_query, *params]
