"""The search index of one `messages.json`: SQLite FTS5 with BM25, updated from the records appended since last time.

The index (`messages.json.index.sqlite`, beside the history) is derived data. It reads the history only through the
store's `read_records`, and remembers where to continue (`next_offset`), the id of the file's first record and a
digest of the bytes just before `next_offset`. A file that shrank, starts with another record or whose bytes before
that point changed (rewritten, recovered, replaced) is re-indexed from scratch; a missing, corrupt or outdated index
is rebuilt. A record whose message id is already indexed is a newer version of that message (an edit): its row is
replaced. Appends cost O(new records).

Concurrency: one update at a time per index file in a process (a lock shared by every `SessionIndex` of that file),
and across processes SQLite's write transaction, inside which the stored offset is checked again; message ids are
UNIQUE, so a record is never indexed twice.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from summarization_pydantic_ai.store import read_records

from ..eviction._content import evicted_paths
from ._index_file import BUSY_TIMEOUT_S as _BUSY_TIMEOUT_S
from ._index_file import Hit, IndexDiscardedError, Pending
from ._index_file import file_lock as _file_lock
from ._index_file import is_corruption as _is_corruption
from ._index_file import set_wal as _set_wal
from ._index_file import tail_digests as _tail_digests
from ._text import message_text, space_cjk

__all__ = ["Hit", "IndexDiscardedError", "Pending", "SessionIndex", "evicted_paths"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs(
    rowid INTEGER PRIMARY KEY, message_id TEXT NOT NULL UNIQUE, position INTEGER NOT NULL, roles TEXT NOT NULL,
    tool_names TEXT NOT NULL, ts TEXT NOT NULL, body TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(body, tokenize='unicode61 remove_diacritics 2');
"""
_VERSION = "2"
_RETRIES = 5
_T = TypeVar("_T")


class SessionIndex:
    """Full-text index of one history file."""

    def __init__(self, messages_path: str | Path, *, index_path: str | Path | None = None) -> None:
        self.messages_path = Path(messages_path)
        self.index_path = (
            Path(index_path) if index_path else self.messages_path.with_name(self.messages_path.name + ".index.sqlite")
        )
        self._lock = _file_lock(self.index_path.resolve())
        self._db: sqlite3.Connection | None = None

    # -- connection ----------------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        self.index_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = self._open()
        except sqlite3.DatabaseError as exc:  # a corrupt index is derived data: start over
            if not _is_corruption(exc):
                raise
            self._remove_files()
            db = self._open()
        self._db = db
        return db

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.index_path, check_same_thread=False, isolation_level=None, timeout=_BUSY_TIMEOUT_S)
        try:
            _set_wal(db)
            db.execute("PRAGMA synchronous=OFF")  # the index can always be rebuilt from messages.json
            check = db.execute("PRAGMA quick_check(1)").fetchone()  # once per connection: ~25 ms for 10k messages
            if not check or check[0] != "ok":
                raise sqlite3.DatabaseError(f"corrupt index: {check[0] if check else 'no answer'}")
            if self._meta(db, "version") != _VERSION:
                self._recreate(db)
        except BaseException:
            db.close()
            raise
        return db

    @staticmethod
    def _meta(db: sqlite3.Connection, key: str) -> str | None:
        try:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise
        return str(row[0]) if row else None

    @staticmethod
    def _recreate(db: sqlite3.Connection) -> None:
        """An empty index of this version (tables of an older one are dropped)."""
        db.execute("BEGIN IMMEDIATE")
        try:
            if SessionIndex._meta(db, "version") != _VERSION:  # another process may have done it meanwhile
                for table in ("docs", "docs_fts", "meta"):
                    db.execute(f"DROP TABLE IF EXISTS {table}")
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    db.execute(statement)
                SessionIndex._clear(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    @staticmethod
    def _clear(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM docs")
        db.execute("DELETE FROM docs_fts")
        db.execute("DELETE FROM meta")
        db.executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?)",
            [("version", _VERSION), ("offset", "0"), ("positions", "0"), ("first_id", ""), ("tail", "")],
        )

    def _remove_files(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        for suffix in ("", "-wal", "-shm", "-journal"):
            self.index_path.with_name(self.index_path.name + suffix).unlink(missing_ok=True)

    def _guarded(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `operation`; a corrupt index file is removed and `IndexDiscardedError` raised (update again)."""
        try:
            return operation(self._connect())
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise
            self._remove_files()
            raise IndexDiscardedError(f"the search index {self.index_path} was corrupt and is rebuilt") from exc

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- reading the history file --------------------------------------------------------------------------------

    def read_pending(self) -> Pending:
        """The records written since the last update (all of them when the index must start over). No writes.
        Sync: run it in a thread."""
        with self._lock:
            return self._guarded(self._read_pending)

    def _read_pending(self, db: sqlite3.Connection) -> Pending:
        expected = self._state(db)
        offset = int(expected[0])
        batch = read_records(self.messages_path, offset)
        old_tail, tail = _tail_digests(self.messages_path, (offset, batch.next_offset))
        # Checked after reading, so a file replaced meanwhile is noticed too: the bytes before the offset changed
        # (rewritten, shrunk) or the first record did (another file).
        reset = offset > 0 and (old_tail != expected[2] or (batch.first_message_id or "") != expected[1])
        if reset:
            batch = read_records(self.messages_path, 0)
            (tail,) = _tail_digests(self.messages_path, (batch.next_offset,))
        return Pending(batch.records, batch.next_offset, batch.first_message_id, tail or "", expected, reset)

    @staticmethod
    def _state(db: sqlite3.Connection) -> tuple[str, str, str]:
        """The stored (offset, first id, tail digest), in one query."""
        rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('offset', 'first_id', 'tail')").fetchall())
        return str(rows.get("offset", "0")), str(rows.get("first_id", "")), str(rows.get("tail", ""))

    # -- writing the index ---------------------------------------------------------------------------------------

    def apply(self, pending: Pending, extras: dict[str, str]) -> int | None:
        """Index `pending` (with evicted output text by message id in `extras`) and advance the offset, in one
        write transaction. Returns the number of rows written, or `None` when the index changed since `pending` was
        read (another update got there first: read again)."""
        with self._lock:
            return self._guarded(lambda db: self._apply(db, pending, extras))

    def _apply(self, db: sqlite3.Connection, pending: Pending, extras: dict[str, str]) -> int | None:
        db.execute("BEGIN IMMEDIATE")  # the write lock first, then the state check: one writer at a time
        try:
            if self._state(db) != pending.expected:
                db.execute("ROLLBACK")
                return None
            if pending.reset:
                self._clear(db)
            positions = int(self._meta(db, "positions") or 0)
            written = 0
            for record in pending.records:
                text = message_text(record.message, extras.get(record.message_id or "", ""))
                if text is None:
                    positions += 1  # a record without an id takes its place in the file but is not searchable
                    continue
                row = (text.message_id, positions, text.roles, text.tool_names, text.timestamp, text.body)
                cursor = db.execute(
                    "INSERT OR IGNORE INTO docs(message_id, position, roles, tool_names, ts, body) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    row,
                )
                if cursor.rowcount:
                    rowid = cursor.lastrowid
                    positions += 1
                else:  # a newer version of an indexed message: replace its text, keep its place
                    (rowid,) = db.execute("SELECT rowid FROM docs WHERE message_id = ?", (text.message_id,)).fetchone()
                    db.execute(
                        "UPDATE docs SET roles = ?, tool_names = ?, ts = ?, body = ? WHERE rowid = ?",
                        (text.roles, text.tool_names, text.timestamp, text.body, rowid),
                    )
                    db.execute("DELETE FROM docs_fts WHERE rowid = ?", (rowid,))
                db.execute("INSERT INTO docs_fts(rowid, body) VALUES (?, ?)", (rowid, space_cjk(text.body)))
                written += 1
            db.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                [
                    ("offset", str(pending.next_offset)),
                    ("positions", str(positions)),
                    ("first_id", pending.first_message_id or ""),
                    ("tail", pending.tail),
                ],
            )
            db.execute("COMMIT")
            return written
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def update(self, *, defer: Callable[[Pending], bool] | None = None) -> int | Pending:
        """Index what was written since the last update; returns the rows written. When `defer(pending)` says so,
        returns the `Pending` records instead, unwritten (the caller reads evicted outputs, then calls `apply`).
        Single-flight: concurrent updates of one file wait for each other. Sync: run it in a thread."""
        with self._lock:
            for attempt in range(_RETRIES):
                try:
                    pending = self.read_pending()
                    if pending.empty:
                        return 0
                    if defer is not None and defer(pending):
                        return pending
                    written = self.apply(pending, {})
                except IndexDiscardedError:
                    if attempt == _RETRIES - 1:
                        raise
                    continue  # rebuilt from scratch on the next attempt
                if written is not None:
                    return written
            return 0

    # -- querying --------------------------------------------------------------------------------------------------

    def search(
        self,
        fts_query: str,
        *,
        roles: Sequence[str] = (),
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[Hit]:
        where = ["docs_fts MATCH ?"]
        params: list[Any] = [fts_query]
        if roles:
            where.append("(" + " OR ".join("(' ' || d.roles || ' ') LIKE ?" for _ in roles) + ")")
            params += [f"% {role} %" for role in roles]
        if tool_name:
            where.append("(' ' || d.tool_names || ' ') LIKE ?")
            params.append(f"% {tool_name} %")
        if since:
            where.append("d.ts >= ?")
            params.append(since)
        if until:
            where.append("d.ts <= ?")
            params.append(until)
        # Rank first, fetch the page's rows after: sorting whole rows would copy the body of every match into
        # the sorter (a common word matches most messages). Filters need the docs row but not its body. Equal
        # scores go in message order, so pages never overlap.
        ranked = (
            "SELECT docs_fts.rowid AS rowid, bm25(docs_fts) AS score FROM docs_fts "
            + ("JOIN docs d ON d.rowid = docs_fts.rowid " if len(where) > 1 else "")
            + "WHERE "
            + " AND ".join(where)
            + " ORDER BY score, rowid LIMIT ? OFFSET ?"
        )
        sql = (
            "SELECT d.message_id, d.position, d.roles, d.tool_names, d.ts, d.body, r.score "
            f"FROM ({ranked}) r JOIN docs d ON d.rowid = r.rowid ORDER BY r.score, r.rowid"
        )
        params += [limit, offset]
        with self._lock:
            rows = self._guarded(lambda db: db.execute(sql, params).fetchall())
        return [Hit(str(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), float(r[6])) for r in rows]

    def indexed_records(self) -> int:
        """How many messages the index holds (one row per message id, whatever its number of versions)."""
        with self._lock:
            return int(self._guarded(lambda db: db.execute("SELECT COUNT(*) FROM docs").fetchone()[0]))
