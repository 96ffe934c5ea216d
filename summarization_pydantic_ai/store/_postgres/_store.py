"""One session of a PostgreSQL history database, with the guarantees of `JsonHistoryStore`: the operations of
`PostgresHistoryStore` (`_db.py`, which adds how a store is opened), over its database's connection pool.

- Every append is one transaction that first locks the session's row: two workers appending to one session take
  turns, and a worker killed mid-append leaves nothing of its batch (the server rolls the transaction back).
- Optimistic concurrency: the store remembers the last record of its session it saw; when another writer appended
  since, an append with something new raises `HistoryStoreConflictError` and writes nothing (reload and retry).
- The store keeps an index of its session (id -> place, latest digest, summary provenance), brought up to date from
  the records written after the last one it saw; `in`, `len()` and `size_bytes()` answer from it without I/O (as of
  the store's latest call), contents are read only when asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

from psycopg.errors import DivisionByZero, ForeignKeyViolation, UniqueViolation
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from .._database import SearchHit
from .._framing import Record
from .._paging import check_page, page_of
from .._protocol import HistoryPage, HistoryStoreError
from .._session_index import NewRecord, SessionIndex, encode_record, load_summary
from .._working import working_records
from ._append import Rows, clean, rows_of, write_rows
from ._catalog import catalog_before
from ._schema import Connection, Tables
from ._search import search_rows, tsvector_literal

__all__ = ["PostgresConnection", "PostgresSession"]


class PostgresConnection(Protocol):
    """What a session's store uses of its database (`PostgresHistoryDatabase`)."""

    @property
    def url(self) -> str: ...
    @property
    def tables(self) -> Tables: ...

    def connection(self) -> AbstractAsyncContextManager[Connection]: ...

    async def close(self) -> None: ...


class PostgresSession:
    """The records of one session in a PostgreSQL history database: everything `PostgresHistoryStore` does."""

    def __init__(self, session_id: str, database: PostgresConnection, *, owns_database: bool) -> None:
        self._owns_database = owns_database
        self._database = database
        self._session_id = session_id
        self._index = SessionIndex()
        self._size = 0
        self._expected: int | None = None
        """The head this store last read or wrote; another writer moved it when the database's differs."""
        self._lock: asyncio.Lock | None = None

    @property
    def path(self) -> Path | None:
        """`None`: the history is no file (see `database`)."""
        return None

    @property
    def session_id(self) -> str:
        return self._session_id

    def _where(self) -> str:
        return f"session {self._session_id!r} of {self._database.url}"

    def _guard(self) -> asyncio.Lock:
        """One operation of this store at a time (its index is shared by its callers)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    # -- the index --------------------------------------------------------------------------------------------------

    async def _refresh(self, conn: Connection, *, lock: bool = False) -> int:
        """Bring the index up to date (with `lock`, locking the session's row first); returns the session's head."""
        suffix = " FOR UPDATE" if lock else ""
        cursor = await conn.execute(
            self._database.tables.sql("SELECT id, head, bytes FROM {sessions} WHERE name = %s" + suffix),  # pyright: ignore[reportArgumentType]
            (self._session_id,),
        )
        row = await cursor.fetchone()
        session, head, size = (int(row[0]), int(row[1]), int(row[2])) if row else (None, 0, 0)
        index = self._index
        if session != index.session or head < index.head:
            index = self._index = SessionIndex(session)  # created, deleted or replaced: start over
        if session is not None and head > index.head:
            cursor = await conn.execute(
                self._database.tables.sql(
                    "SELECT seq, message_id, position, digest, summary FROM {records} "
                    "WHERE session = %s AND seq > %s ORDER BY seq"
                ),
                (session, index.head),
            )
            for seq, message_id, position, digest, summary in await cursor.fetchall():
                index.place(
                    Record(int(seq), 0, str(message_id), load_summary(summary), 0), int(position), bytes(digest)
                )
            index.head = head
        self._size = size
        return head

    async def _read(self, conn: Connection, records: Sequence[Record]) -> list[ModelMessage]:
        if not records:
            return []
        seqs = [r.offset for r in records]
        cursor = await conn.execute(
            self._database.tables.sql("SELECT seq, data FROM {records} WHERE session = %s AND seq = ANY(%s)"),
            (self._index.session, seqs),
        )
        data = {int(seq): bytes(raw) for seq, raw in await cursor.fetchall()}
        try:
            return ModelMessagesTypeAdapter.validate_json(b"[" + b",".join(data[s] for s in seqs) + b"]")
        except (KeyError, ValueError) as exc:
            raise HistoryStoreError(f"{self._where()}: a record cannot be read as a message: {exc}") from exc

    async def _snapshot(self, select: str) -> list[ModelMessage]:
        async with self._guard(), self._database.connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self._expected = await self._refresh(conn)
            index = self._index
            records = index.slots if select == "all" else working_records(index.slots, index.positions)
            return await self._read(conn, records)

    # -- appending --------------------------------------------------------------------------------------------------

    async def append(self, messages: Sequence[ModelMessage]) -> int:
        """Record new messages, and a new version of each recorded message whose content changed, in one
        transaction; returns how many records were written. One round trip when this store wrote or read the
        session last (`_append`), else the session's row is locked first."""
        encoded = [encode_record(m) for m in messages]
        async with self._guard():
            try:
                async with self._database.connection() as conn:
                    written = await self._append_at_once(conn, encoded)
                    if written is not None:
                        return written
                    async with conn.transaction():
                        return await self._append_locked(conn, encoded)
            except BaseException:
                self._index = (
                    SessionIndex()
                )  # what the rolled-back transaction indexed may be gone: re-read on next use
                raise

    async def _append_at_once(self, conn: Connection, encoded: list[NewRecord]) -> int | None:
        """The append in one statement (one round trip), when this store knows the session's head; `None` when
        it does not, or another writer moved the head (nothing written: take the locked path)."""
        index = self._index
        if index.session is None or self._expected != index.head:
            return None
        new = index.changed(encoded, head=index.head, expected=self._expected, where=self._where())
        if not new:
            return None  # nothing new as far as this store knows: the locked path says so for sure
        rows = rows_of(index, new)
        rows.catalog = await catalog_before(conn, self._database.tables, index, new)
        try:
            await write_rows(conn, self._database.tables, rows)  # one statement: its own transaction
        except (DivisionByZero, UniqueViolation, ForeignKeyViolation):
            return None  # another writer moved the head, or the session went: rolled back
        self._committed(rows)
        return len(new)

    async def _append_locked(self, conn: Connection, encoded: list[NewRecord]) -> int:
        head = await self._refresh(conn, lock=True)
        new = self._index.changed(encoded, head=head, expected=self._expected, where=self._where())
        if not new:
            return 0
        if self._index.session is None:
            await self._create_session(conn)
            head = await self._refresh(conn, lock=True)
            if head:  # another worker created it and wrote first: this store has not read it
                return await self._append_locked(conn, encoded)
        rows = rows_of(self._index, new)
        rows.catalog = await catalog_before(conn, self._database.tables, self._index, new)
        await write_rows(conn, self._database.tables, rows)
        self._committed(rows)
        return len(new)

    def _committed(self, rows: Rows) -> None:
        rows.commit_to(self._index)
        self._expected = rows.head
        self._size += rows.size

    async def _create_session(self, conn: Connection) -> None:
        await conn.execute(
            self._database.tables.sql("INSERT INTO {sessions} (name) VALUES (%s) ON CONFLICT (name) DO NOTHING"),
            (self._session_id,),
        )

    # -- reading ----------------------------------------------------------------------------------------------------

    async def load(self) -> list[ModelMessage]:
        """The working context: the latest summary with what it kept, plus every message after it."""
        return await self._snapshot("working")

    async def load_all(self) -> list[ModelMessage]:
        """Every message (latest versions, at the place of the first) and summary, in order."""
        return await self._snapshot("all")

    async def read(
        self, start_id: str | None = None, end_id: str | None = None, *, offset: int = 0, limit: int = 50
    ) -> HistoryPage:
        """The original messages from `start_id` to `end_id` (inclusive, in recorded order), paged."""
        check_page(offset, limit)
        async with self._guard(), self._database.connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self._expected = await self._refresh(conn)
            index = self._index
            page, total, next_offset = page_of(
                index.slots, index.positions, start_id, end_id, offset=offset, limit=limit, where=self._where()
            )
            return HistoryPage(await self._read(conn, page), total, offset, next_offset)

    async def load_versions(self) -> list[ModelMessage]:
        """Every record as written (older versions included), in recording order."""
        async with self._database.connection() as conn:
            cursor = await conn.execute(
                self._database.tables.sql(
                    "SELECT r.data FROM {records} r JOIN {sessions} s ON s.id = r.session WHERE s.name = %s "
                    "ORDER BY r.seq"
                ),
                (self._session_id,),
            )
            rows = await cursor.fetchall()
        return ModelMessagesTypeAdapter.validate_json(b"[" + b",".join(bytes(r[0]) for r in rows) + b"]")

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
        """Messages of this session matching `query`, best first (see `SearchableHistoryStore.search`)."""
        async with self._database.connection() as conn:
            return await search_rows(
                conn,
                self._database.tables,
                query,
                [self._session_id],
                roles=roles,
                tool_name=tool_name,
                since=since,
                until=until,
                limit=limit,
                offset=offset,
            )

    async def add_search_text(self, message_id: str, text: str) -> None:
        """Index `text` with the recorded message `message_id`, replacing text added before for it."""
        tables = self._database.tables
        async with self._database.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                tables.sql(
                    "SELECT m.session, m.body FROM {messages} m JOIN {sessions} s ON s.id = m.session "
                    "WHERE s.name = %s AND m.message_id = %s FOR UPDATE OF m"
                ),
                (self._session_id, message_id),
            )
            row = await cursor.fetchone()
            if row is None:
                raise HistoryStoreError(f"no message with id {message_id!r} in {self._where()}")
            extra = tsvector_literal(text)
            await conn.execute(
                tables.sql(
                    "UPDATE {messages} SET extra = %s, extra_tsv = %s::tsvector, tsv = %s::tsvector || %s::tsvector "
                    "WHERE session = %s AND message_id = %s"
                ),
                (clean(text), extra, tsvector_literal(str(row[1])), extra, row[0], message_id),
            )

    async def search_texts(self) -> dict[str, str]:
        """The texts added with `add_search_text`, by message id."""
        async with self._database.connection() as conn:
            cursor = await conn.execute(
                self._database.tables.sql(
                    "SELECT m.message_id, m.extra FROM {messages} m JOIN {sessions} s ON s.id = m.session "
                    "WHERE s.name = %s AND m.extra IS NOT NULL ORDER BY m.position"
                ),
                (self._session_id,),
            )
            return {str(r[0]): str(r[1]) for r in await cursor.fetchall()}

    # -- the rest of the protocol (from the index: no I/O) ----------------------------------------------------------

    def __contains__(self, message_id: object) -> bool:
        """Whether the message was recorded, as of this store's latest call."""
        return message_id in self._index.positions

    def __len__(self) -> int:
        """How many messages (and summaries) are recorded, as of this store's latest call."""
        return len(self._index.slots)

    def size_bytes(self) -> int:
        """The size of the session's records (every version), as of this store's latest call."""
        return self._size

    async def open_async(self) -> None:
        """Connect and read the session's index now (so `in`, `len()` and `size_bytes()` are current)."""
        async with self._guard(), self._database.connection() as conn:
            self._expected = await self._refresh(conn)

    async def close(self) -> None:
        """Close the connection pool when this store opened it (a store of a database leaves it open)."""
        if self._owns_database:
            await self._database.close()
