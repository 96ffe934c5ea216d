"""`PostgresHistoryDatabase`: many sessions in one PostgreSQL database, through one async connection pool; and
`PostgresHistoryStore`, one of its sessions (the session's operations are `PostgresSession`, in `_store.py`)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .._catalog import SessionCatalog
from .._database import SearchHit, SessionSummary
from .._protocol import HistoryStoreError, validate_session_id
from .._url import redact_url
from ._catalog import read_catalogs
from ._schema import Connection, Tables, migrate
from ._search import search_rows
from ._store import PostgresSession

__all__ = [
    "Connection",
    "PostgresHistoryDatabase",
    "PostgresHistoryStore",
    "first_connect_options",
    "open_postgres_database",
    "unreachable_message",
]


def first_connect_options(dsn: str, options: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The options of the first, direct connection: `options`, with a libpq `connect_timeout` of `timeout` unless
    the URL or `options` set one (libpq waits for the operating system's TCP timeout otherwise)."""
    if "connect_timeout" in options or "connect_timeout" in conninfo_to_dict(dsn):
        return options
    return {**options, "connect_timeout": max(2, math.ceil(timeout))}  # libpq's minimum is 2 s


def unreachable_message(url: str, dsn: str, exc: psycopg.Error) -> str:
    """'no connection to <url>: <the server's or libpq's reason>', with the password never shown."""
    reason = " ".join(str(exc).split())[:500]
    password = conninfo_to_dict(dsn).get("password")
    if password:
        reason = reason.replace(str(password), "***")
    return f"no connection to {url}: {reason}"


class PostgresHistoryDatabase:
    """The histories of many sessions in one PostgreSQL database (see `HistoryDatabase`).

    Nothing is connected until first use; then a pool of `min_size` to `max_size` connections opens and the schema
    is created or migrated (once per database, under an advisory lock: many workers may start at once). Use it from
    one event loop; `close()` releases the pool.

    Example:
        ```python
        database = PostgresHistoryDatabase('postgresql://app@db.internal/agents', max_size=20)
        store = database.session('chat-42')  # a SearchableHistoryStore
        ```
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 30.0,
        **connect_options: Any,
    ) -> None:
        if min_size < 0 or max_size < max(min_size, 1):
            raise HistoryStoreError(f"pool sizes must satisfy 0 <= min_size <= max_size, max_size >= 1: {min_size}")
        self._dsn = dsn
        self.tables = Tables(schema)
        self._pool_options: dict[str, Any] = {"min_size": min_size, "max_size": max_size, "timeout": timeout}
        self._connect_options = {"autocommit": True, **connect_options}
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._opening: asyncio.Lock | None = None
        self._stores: dict[str, PostgresHistoryStore] = {}
        self._closed = False

    @property
    def url(self) -> str:
        return redact_url(self._dsn)

    @property
    def pool(self) -> AsyncConnectionPool[Connection] | None:
        """The connection pool (`None` before first use)."""
        return self._pool

    def session(self, session_id: str) -> PostgresHistoryStore:
        validate_session_id(session_id)
        store = self._stores.get(session_id)
        if store is None:
            store = self._stores[session_id] = PostgresHistoryStore(session_id=session_id, database=self)
        return store

    async def _open(self) -> AsyncConnectionPool[Connection]:
        if self._pool is not None:
            return self._pool
        if self._closed:
            raise HistoryStoreError(f"{self.url} was closed")
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                # One direct connection first, for the schema: a server that refuses or does not answer is an
                # error now, not after the pool's `timeout` of retries.
                await self._migrate_once()
                pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
                    self._dsn,
                    open=False,
                    kwargs=self._connect_options,
                    name="summarization-pydantic-ai",
                    **self._pool_options,
                )
                try:
                    await pool.open(wait=True, timeout=self._pool_options["timeout"])
                except BaseException:
                    await pool.close()
                    raise
                self._pool = pool
            return self._pool

    async def _migrate_once(self) -> None:
        options = first_connect_options(self._dsn, self._connect_options, self._pool_options["timeout"])
        try:
            conn: Connection = await AsyncConnection.connect(self._dsn, **options)
        except psycopg.OperationalError as exc:
            raise HistoryStoreError(unreachable_message(self.url, self._dsn, exc)) from exc
        async with conn:
            await migrate(conn, self.tables, self.url)

    @asynccontextmanager
    async def connection(self) -> AsyncGenerator[Connection]:
        """A pooled connection (autocommit; use `conn.transaction()`), with errors as `HistoryStoreError`."""
        try:
            pool = await self._open()
            async with pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise HistoryStoreError(
                f"no connection to {self.url} within {self._pool_options['timeout']}s (pool of "
                f"{self._pool_options['max_size']}: raise max_size, or check the server): {exc}"
            ) from exc
        except psycopg.Error as exc:
            raise HistoryStoreError(f"{self.url}: {type(exc).__name__}: {str(exc).strip()[:500]}") from exc

    async def sessions(self) -> list[SessionSummary]:
        async with self.connection() as conn:
            cursor = await conn.execute(
                self.tables.sql(
                    "SELECT name, messages, bytes, created_at, updated_at FROM {sessions} WHERE head > 0 "
                    "ORDER BY updated_at DESC, name"
                )
            )
            rows = await cursor.fetchall()
        return [SessionSummary(str(r[0]), int(r[1]), int(r[2]), r[3], r[4]) for r in rows]

    async def catalog(self, session_ids: Sequence[str] | None = None) -> list[SessionCatalog]:
        """What a listing shows of every session holding a record (or of `session_ids`), most recently updated
        first: one row per session, kept by each append (see `SessionCatalog`)."""
        names = None if session_ids is None else [validate_session_id(s) for s in session_ids]
        async with self.connection() as conn:
            return await read_catalogs(conn, self.tables, names)

    async def delete_session(self, session_id: str) -> bool:
        validate_session_id(session_id)
        async with self.connection() as conn:
            cursor = await conn.execute(self.tables.sql("DELETE FROM {sessions} WHERE name = %s"), (session_id,))
            return cursor.rowcount > 0

    async def search(
        self,
        query: str,
        *,
        session_ids: Sequence[str] | None = None,
        roles: Sequence[str] = (),
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchHit]:
        async with self.connection() as conn:
            return await search_rows(
                conn,
                self.tables,
                query,
                session_ids,
                roles=roles,
                tool_name=tool_name,
                since=since,
                until=until,
                limit=limit,
                offset=offset,
            )

    async def close(self) -> None:
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


def open_postgres_database(url: str, **options: Any) -> PostgresHistoryDatabase:
    """What `open_database('postgresql://...')` returns (`options`: see `PostgresHistoryDatabase`)."""
    return PostgresHistoryDatabase(url, **options)


class PostgresHistoryStore(PostgresSession):
    """The history of one session in PostgreSQL (see `PostgresHistoryDatabase` for many sessions).

    Example:
        ```python
        store = PostgresHistoryStore('postgresql://app@db.internal/agents', session_id='chat-42')
        await store.append(messages)  # each message needs an id: see ensure_message_id
        history = await store.load()  # the working context, to pass as message_history
        ```
    """

    def __init__(
        self,
        dsn: str | None = None,
        session_id: str = "default",
        *,
        database: PostgresHistoryDatabase | None = None,
        **options: Any,
    ) -> None:
        if database is None:
            if dsn is None:
                raise HistoryStoreError("PostgresHistoryStore needs a dsn (or a PostgresHistoryDatabase)")
            self._history_database = PostgresHistoryDatabase(dsn, **options)
        else:
            self._history_database = database
        super().__init__(session_id, self._history_database, owns_database=database is None)

    @property
    def database(self) -> PostgresHistoryDatabase:
        return self._history_database
