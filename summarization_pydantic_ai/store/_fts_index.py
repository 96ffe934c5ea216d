"""The search index of one `messages.json`: SQLite FTS5 beside the file, caught up from the records appended since.

One index per history file (`messages.json.index.sqlite`), one implementation: `JsonHistoryStore.search` (and
`pydantic-deep search` on files) and the harness's history-search tools both use it. It reads the history only
through the store's `read_records`, and remembers where to continue (`next_offset`), the id of the file's first
record and a digest of the bytes just before `next_offset`. A file that shrank, starts with another record or whose
bytes before that point changed (rewritten, recovered, replaced) is indexed again from scratch; a missing, corrupt
or outdated index is rebuilt. A record whose message id is already indexed is a newer version of that message (an
edit): its row is replaced. Appends cost O(new records).

What is indexed for a message is the scan's text (`message_text`): the rendered message and the search text added
for it (`add_search_text`, kept in `messages.json.search-text.json`, or an evicted output's full text the caller
passes), as the scan's normalized words, so the index finds exactly the messages the scan finds.

Concurrency: one update at a time per index file in a process (a lock shared by every index of that file), and
across processes SQLite's write transaction, inside which the stored offset is checked again; message ids are
UNIQUE, so a record is never indexed twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from . import _fts_db as fts_db
from ._fts_db import with_extra
from ._json_search import load_search_texts, search_texts_path
from ._reader import StoredRecord, read_records
from ._search_text import message_text

__all__ = ["FileSearchIndex", "Hit", "IndexDiscardedError", "Pending", "Row"]

_RETRIES = 5
_T = TypeVar("_T")


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


@dataclass(frozen=True)
class Row:
    """A message as the index holds it (its text with the added search text)."""

    message_id: str
    position: int
    roles: str
    tool_names: str
    timestamp: str
    body: str


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
    texts_stamp: str = ""
    """Size and time of the search-text file (`messages.json.search-text.json`) when it was read."""
    texts: dict[str, str] = field(default_factory=dict[str, str])
    """The added search texts by message id (read when there are records to index or the file changed)."""
    texts_changed: bool = False
    """The search-text file changed since the last update: rows whose text changed are indexed again."""

    @property
    def empty(self) -> bool:
        return not self.records and not self.reset and not self.texts_changed


class FileSearchIndex:
    """Full-text index of one history file."""

    def __init__(self, messages_path: str | Path, *, index_path: str | Path | None = None) -> None:
        self.messages_path = Path(messages_path)
        self.index_path = (
            Path(index_path) if index_path else self.messages_path.with_name(self.messages_path.name + ".index.sqlite")
        )
        self._lock = fts_db.file_lock(self.index_path.resolve())
        self._db: sqlite3.Connection | None = None

    # -- connection ----------------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        self.index_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = fts_db.connect(self.index_path)
        except sqlite3.DatabaseError as exc:  # a corrupt index is derived data: start over
            if not fts_db.is_corruption(exc):
                raise
            fts_db.remove_files(self.index_path, None)
            db = fts_db.connect(self.index_path)
        self._db = db
        return db

    def _guarded(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `operation`; a corrupt index file is removed and `IndexDiscardedError` raised (update again)."""
        try:
            return operation(self._connect())
        except sqlite3.DatabaseError as exc:
            if not fts_db.is_corruption(exc):
                raise
            db, self._db = self._db, None
            fts_db.remove_files(self.index_path, db)
            raise IndexDiscardedError(f"the search index {self.index_path} was corrupt and is rebuilt") from exc

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- reading the history file --------------------------------------------------------------------------------

    def read_pending(self) -> Pending:
        """The records written since the last update (all of them when the index must start over), and the added
        search texts when they changed. No writes. Sync: run it in a thread."""
        with self._lock:
            return self._guarded(self._read_pending)

    def _read_pending(self, db: sqlite3.Connection) -> Pending:
        expected, stored_stamp = self._state(db)
        offset = int(expected[0])
        batch = read_records(self.messages_path, offset)
        old_tail, tail = fts_db.tail_digests(self.messages_path, (offset, batch.next_offset))
        # Checked after reading, so a file replaced meanwhile is noticed too: the bytes before the offset changed
        # (rewritten, shrunk) or the first record did (another file).
        reset = offset > 0 and (old_tail != expected[2] or (batch.first_message_id or "") != expected[1])
        if reset:
            batch = read_records(self.messages_path, 0)
            (tail,) = fts_db.tail_digests(self.messages_path, (batch.next_offset,))
        stamp = fts_db.stamp(search_texts_path(self.messages_path))
        changed = stamp != stored_stamp
        texts = load_search_texts(self.messages_path) if stamp and (changed or batch.records or reset) else {}
        return Pending(
            batch.records, batch.next_offset, batch.first_message_id, tail or "", expected, reset, stamp, texts, changed
        )

    @staticmethod
    def _state(db: sqlite3.Connection) -> tuple[tuple[str, str, str], str]:
        """The stored (offset, first id, tail digest) and search-text stamp, in one query."""
        rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('offset', 'first_id', 'tail', 'texts')"))
        state = (str(rows.get("offset", "0")), str(rows.get("first_id", "")), str(rows.get("tail", "")))
        return state, str(rows.get("texts", ""))

    # -- writing the index ---------------------------------------------------------------------------------------

    def apply(self, pending: Pending, extras: dict[str, str]) -> int | None:
        """Index `pending` (with evicted output text by message id in `extras`, before the added search texts) and
        advance the offset, in one write transaction. Returns the number of rows written, or `None` when the index
        changed since `pending` was read (another update got there first: read again)."""
        with self._lock:
            return self._guarded(lambda db: self._apply(db, pending, extras))

    def _apply(self, db: sqlite3.Connection, pending: Pending, extras: dict[str, str]) -> int | None:
        db.execute("BEGIN IMMEDIATE")  # the write lock first, then the state check: one writer at a time
        try:
            if self._state(db)[0] != pending.expected:
                db.execute("ROLLBACK")
                return None
            if pending.reset:
                fts_db.clear(db)
            positions = int(fts_db.meta(db, "positions") or 0)
            written = 0
            for record in pending.records:
                message_id = record.message_id or ""
                text = message_text(record.message)
                if text is None:
                    positions += 1  # a record without an id takes its place in the file but is not searchable
                    continue
                extra = extras.get(message_id) or pending.texts.get(message_id, "")
                row = (text.message_id, positions, text.roles, text.tool_names, text.timestamp, text.body, extra)
                cursor = db.execute(
                    "INSERT OR IGNORE INTO docs(message_id, position, roles, tool_names, ts, body, extra) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
                if cursor.rowcount:
                    rowid = cursor.lastrowid
                    positions += 1
                else:  # a newer version of an indexed message: replace its text, keep its place
                    (rowid,) = db.execute("SELECT rowid FROM docs WHERE message_id = ?", (text.message_id,)).fetchone()
                    db.execute(
                        "UPDATE docs SET roles = ?, tool_names = ?, ts = ?, body = ?, extra = ? WHERE rowid = ?",
                        (text.roles, text.tool_names, text.timestamp, text.body, extra, rowid),
                    )
                    db.execute("DELETE FROM docs_fts WHERE rowid = ?", (rowid,))
                fts_db.index_words(db, rowid, text.body, extra)
                written += 1
            if pending.texts_changed:
                written += fts_db.apply_texts(db, pending.texts)
            db.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                [
                    ("offset", str(pending.next_offset)),
                    ("positions", str(positions)),
                    ("first_id", pending.first_message_id or ""),
                    ("tail", pending.tail),
                    ("texts", pending.texts_stamp),
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
        """Messages matching `fts_query` (an FTS5 expression over the normalized words: `fts_expression`), ranked
        by BM25 (best first), with the filters applied in the database."""
        where, params = fts_db.filters(fts_query, roles, tool_name, since, until)
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
            "SELECT d.message_id, d.position, d.roles, d.tool_names, d.ts, d.body, d.extra, r.score "
            f"FROM ({ranked}) r JOIN docs d ON d.rowid = r.rowid ORDER BY r.score, r.rowid"
        )
        params += [limit, offset]
        with self._lock:
            rows = self._guarded(lambda db: db.execute(sql, params).fetchall())
        return [
            Hit(str(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]), with_extra(str(r[5]), str(r[6])), float(r[7]))
            for r in rows
        ]

    def candidates(
        self,
        fts_query: str,
        *,
        roles: Sequence[str] = (),
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> list[tuple[int, int, str]]:
        """(rowid, position, normalized words) of every message matching `fts_query` that passes the filters: for
        a caller that ranks them itself, as `JsonHistoryStore.search` ranks like the scan (then `rows` of a page)."""
        where, params = fts_db.filters(fts_query, roles, tool_name, since, until)
        sql = (
            "SELECT docs_fts.rowid, d.position, docs_fts.words FROM docs_fts JOIN docs d ON d.rowid = docs_fts.rowid "
            "WHERE " + " AND ".join(where)
        )
        with self._lock:
            rows = self._guarded(lambda db: db.execute(sql, params).fetchall())
        return [(int(r[0]), int(r[1]), str(r[2])) for r in rows]

    def rows(self, rowids: Sequence[int]) -> dict[int, Row]:
        """The messages of `rowids` (from `candidates`), by rowid."""
        marks = ", ".join("?" * len(rowids))
        sql = (
            f"SELECT rowid, message_id, position, roles, tool_names, ts, body, extra FROM docs WHERE rowid IN ({marks})"
        )
        with self._lock:
            found = self._guarded(lambda db: db.execute(sql, list(rowids)).fetchall())
        return {
            int(r[0]): Row(str(r[1]), int(r[2]), str(r[3]), str(r[4]), str(r[5]), with_extra(str(r[6]), str(r[7])))
            for r in found
        }

    def indexed_records(self) -> int:
        """How many messages the index holds (one row per message id, whatever its number of versions)."""
        with self._lock:
            return int(self._guarded(lambda db: db.execute("SELECT COUNT(*) FROM docs").fetchone()[0]))
