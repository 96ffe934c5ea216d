"""One session of a SQLite history database, with the guarantees of `JsonHistoryStore`: the operations of
`SQLiteHistoryStore` (`_db.py`, which adds how a store is opened), over its database's connection.

Every append is one transaction (a killed process leaves no partial record). The store keeps an index of its
session (message id -> place, latest version's digest, summary provenance) and brings it up to date from the
records written after the last one it saw (O(new records)); contents are read only when asked for.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, TypeVar

import anyio.to_thread
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from .._database import SearchHit
from .._framing import Record
from .._paging import check_page, page_of
from .._protocol import HistoryPage, HistoryStoreError
from .._search_text import message_text
from .._session_index import NewRecord, SessionIndex, encode_record, load_summary
from .._working import working_records
from ._catalog import write_catalog
from ._search import fts_text, search_rows

__all__ = ["SQLiteConnection", "SQLiteSession"]

_CHUNK = 500  # ids per `IN (...)`: under SQLite's parameter limit
_T = TypeVar("_T")


class SQLiteConnection(Protocol):
    """What a session's store uses of its database (`SQLiteHistoryDatabase`)."""

    @property
    def url(self) -> str: ...

    def run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T: ...

    async def run_async(self, operation: Callable[[sqlite3.Connection], _T]) -> _T: ...

    def close_sync(self) -> None: ...


class SQLiteSession:
    """The records of one session in a SQLite history database: everything `SQLiteHistoryStore` does."""

    def __init__(self, session_id: str, database: SQLiteConnection, *, owns_database: bool) -> None:
        self._owns_database = owns_database
        self._database = database
        self._session_id = session_id
        self._index = SessionIndex()
        self._expected: int | None = None
        """The head this store last read or wrote; another writer moved it when the database's differs."""

    @property
    def path(self) -> Path | None:
        """`None`: the history is no file of its own (see `database`)."""
        return None

    @property
    def session_id(self) -> str:
        return self._session_id

    # -- the index --------------------------------------------------------------------------------------------------

    def _refresh(self, db: sqlite3.Connection) -> int:
        """Bring the index up to date; returns the database's head for this session."""
        row = db.execute("SELECT id, head FROM sessions WHERE name = ?", (self._session_id,)).fetchone()
        session, head = (int(row[0]), int(row[1])) if row else (None, 0)
        index = self._index
        if session != index.session or head < index.head:
            index = self._index = SessionIndex(session)  # created, deleted or replaced: start over
        if session is not None and head > index.head:
            rows = db.execute(
                "SELECT seq, message_id, position, digest, summary FROM records WHERE session = ? AND seq > ? "
                "ORDER BY seq",
                (session, index.head),
            )
            for seq, message_id, position, digest, summary in rows:
                record = Record(int(seq), 0, str(message_id), load_summary(summary), 0)
                index.place(record, int(position), bytes(digest))
            index.head = head
        return head

    def _read(self, db: sqlite3.Connection, records: Sequence[Record]) -> list[ModelMessage]:
        data: dict[int, bytes] = {}
        seqs = [r.offset for r in records]
        for start in range(0, len(seqs), _CHUNK):
            chunk = seqs[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = db.execute(
                f"SELECT seq, data FROM records WHERE session = ? AND seq IN ({marks})", (self._index.session, *chunk)
            )
            data.update((int(seq), bytes(raw)) for seq, raw in rows)
        if not seqs:
            return []
        try:
            return ModelMessagesTypeAdapter.validate_json(b"[" + b",".join(data[s] for s in seqs) + b"]")
        except (KeyError, ValueError) as exc:
            raise HistoryStoreError(f"{self._where()}: a record cannot be read as a message: {exc}") from exc

    def _snapshot(self, select: str = "all") -> list[ModelMessage]:
        def read(db: sqlite3.Connection) -> list[ModelMessage]:
            db.execute("BEGIN")  # one snapshot: the index and the contents agree
            try:
                self._expected = self._refresh(db)
                index = self._index
                records = index.slots if select == "all" else working_records(index.slots, index.positions)
                return self._read(db, records)
            finally:
                db.execute("COMMIT")

        return self._database.run(read)

    def _where(self) -> str:
        return f"session {self._session_id!r} of {self._database.url}"

    # -- appending --------------------------------------------------------------------------------------------------

    def append_sync(self, messages: Sequence[ModelMessage]) -> int:
        """Record new messages, and a new version of each recorded message whose content changed, in one
        transaction; returns how many records were written."""
        encoded = [encode_record(m) for m in messages]
        return self._database.run(lambda db: self._append(db, encoded))

    def _append(self, db: sqlite3.Connection, encoded: list[NewRecord]) -> int:
        db.execute("BEGIN IMMEDIATE")
        try:
            head = self._refresh(db)
            new = self._index.changed(encoded, head=head, expected=self._expected, where=self._where())
            if not new:
                db.execute("COMMIT")
                return 0
            self._write(db, new)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            self._index = SessionIndex()  # what the rolled-back transaction indexed is gone: re-read on next use
            raise
        self._expected = self._refresh(db)
        return len(new)

    def _write(self, db: sqlite3.Connection, new: list[NewRecord]) -> None:
        now = datetime.now(UTC).isoformat()
        session = self._index.session
        if session is None:
            cursor = db.execute(
                "INSERT INTO sessions(name, created_at, updated_at) VALUES (?, ?, ?)", (self._session_id, now, now)
            )
            session = int(cursor.lastrowid or 0)
        seq, places = self._index.head, len(self._index.slots)
        positions: dict[str, int] = {}
        for item in new:
            seq += 1
            position = self._index.positions.get(item.message_id, positions.get(item.message_id))
            if position is None:
                position = positions[item.message_id] = places
                places += 1
            db.execute(
                "INSERT INTO records(session, seq, message_id, position, digest, summary, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session, seq, item.message_id, position, item.digest, item.summary, item.data),
            )
            self._index_message(db, session, seq, position, item)
        db.execute(
            "UPDATE sessions SET head = ?, messages = ?, bytes = bytes + ?, updated_at = ? WHERE id = ?",
            (seq, places, sum(len(i.data) for i in new), now, session),
        )
        write_catalog(db, self._index, session, seq, new)

    @staticmethod
    def _index_message(db: sqlite3.Connection, session: int, seq: int, position: int, item: NewRecord) -> None:
        text = message_text(item.message)
        assert text is not None  # every recorded message has an id
        row = db.execute(
            "INSERT INTO messages(session, message_id, position, seq, roles, tool_names, ts, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session, message_id) DO UPDATE SET seq = excluded.seq, "
            "roles = excluded.roles, tool_names = excluded.tool_names, ts = excluded.ts, body = excluded.body "
            "RETURNING rowid, extra",
            (session, item.message_id, position, seq, text.roles, text.tool_names, text.timestamp, text.body),
        ).fetchone()
        db.execute("DELETE FROM messages_fts WHERE rowid = ?", (row[0],))
        db.execute("INSERT INTO messages_fts(rowid, body) VALUES (?, ?)", (row[0], fts_text(text.body, row[1])))

    # -- reading ----------------------------------------------------------------------------------------------------

    def load_sync(self) -> list[ModelMessage]:
        return self._snapshot("working")

    def load_all_sync(self) -> list[ModelMessage]:
        return self._snapshot("all")

    def read_sync(
        self, start_id: str | None = None, end_id: str | None = None, *, offset: int = 0, limit: int = 50
    ) -> HistoryPage:
        check_page(offset, limit)

        def read(db: sqlite3.Connection) -> HistoryPage:
            db.execute("BEGIN")
            try:
                self._expected = self._refresh(db)
                index = self._index
                page, total, next_offset = page_of(
                    index.slots, index.positions, start_id, end_id, offset=offset, limit=limit, where=self._where()
                )
                return HistoryPage(self._read(db, page), total, offset, next_offset)
            finally:
                db.execute("COMMIT")

        return self._database.run(read)

    def load_versions_sync(self) -> list[ModelMessage]:
        def read(db: sqlite3.Connection) -> list[ModelMessage]:
            rows = db.execute(
                "SELECT r.data FROM records r JOIN sessions s ON s.id = r.session WHERE s.name = ? ORDER BY r.seq",
                (self._session_id,),
            ).fetchall()
            return ModelMessagesTypeAdapter.validate_json(b"[" + b",".join(bytes(r[0]) for r in rows) + b"]")

        return self._database.run(read)

    # -- search -----------------------------------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        roles: Sequence[str] = (),
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchHit]:
        return await self._database.run_async(
            lambda db: search_rows(
                db,
                query,
                [self._session_id],
                roles=roles,
                tool_name=tool_name,
                since=since,
                until=until,
                limit=limit,
                offset=offset,
            )
        )

    async def add_search_text(self, message_id: str, text: str) -> None:
        def add(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "UPDATE messages SET extra = ? WHERE message_id = ? AND session = "
                    "(SELECT id FROM sessions WHERE name = ?) RETURNING rowid, body",
                    (text, message_id, self._session_id),
                ).fetchone()
                if row is None:
                    raise HistoryStoreError(f"no message with id {message_id!r} in {self._where()}")
                db.execute("UPDATE messages_fts SET body = ? WHERE rowid = ?", (fts_text(row[1], text), row[0]))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        await self._database.run_async(add)

    async def search_texts(self) -> dict[str, str]:
        rows = await self._database.run_async(
            lambda db: db.execute(
                "SELECT m.message_id, m.extra FROM messages m JOIN sessions s ON s.id = m.session "
                "WHERE s.name = ? AND m.extra IS NOT NULL ORDER BY m.position",
                (self._session_id,),
            ).fetchall()
        )
        return {str(r[0]): str(r[1]) for r in rows}

    # -- async API and the rest of the protocol ---------------------------------------------------------------------

    async def append(self, messages: Sequence[ModelMessage]) -> int:
        return await anyio.to_thread.run_sync(self.append_sync, list(messages))

    async def load(self) -> list[ModelMessage]:
        return await anyio.to_thread.run_sync(self.load_sync)

    async def load_all(self) -> list[ModelMessage]:
        return await anyio.to_thread.run_sync(self.load_all_sync)

    async def load_versions(self) -> list[ModelMessage]:
        return await anyio.to_thread.run_sync(self.load_versions_sync)

    async def read(
        self, start_id: str | None = None, end_id: str | None = None, *, offset: int = 0, limit: int = 50
    ) -> HistoryPage:
        return await anyio.to_thread.run_sync(lambda: self.read_sync(start_id, end_id, offset=offset, limit=limit))

    def __contains__(self, message_id: object) -> bool:
        self._database.run(self._refresh)
        return message_id in self._index.positions

    def __len__(self) -> int:
        self._database.run(self._refresh)
        return len(self._index.slots)

    def size_bytes(self) -> int:
        row = self._database.run(
            lambda db: db.execute("SELECT bytes FROM sessions WHERE name = ?", (self._session_id,)).fetchone()
        )
        return int(row[0]) if row else 0

    def close(self) -> None:
        """Close the database when this store opened it (a store of a `SQLiteHistoryDatabase` leaves it open)."""
        if self._owns_database:
            self._database.close_sync()
