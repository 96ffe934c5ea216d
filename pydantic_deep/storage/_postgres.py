"""Memories and checkpoints in the PostgreSQL database of the histories (tables `deep_memory`, `deep_checkpoints`).

Memories are read and swapped through the history database's async connection pool; checkpoints are sync (the
checkpoint middleware calls them from a worker thread) and use a small sync pool of their own, opened on first use.
Both tables live in the history database's schema and are created on first use (under an advisory lock).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, LiteralString, TypeVar, cast

import psycopg
from psycopg import Connection
from psycopg.sql import SQL, Composed, Identifier
from psycopg_pool import ConnectionPool, PoolTimeout

from summarization_pydantic_ai.store import redact_url
from summarization_pydantic_ai.store._postgres import PostgresHistoryDatabase
from summarization_pydantic_ai.store._postgres._db import first_connect_options, unreachable_message

from ..checkpoints._store import Checkpoint, CheckpointNotFoundError, validate_checkpoint_id
from ..memory._storage import check_agent_name
from ._protocols import StorageError
from ._storage import Storage

__all__ = [
    "PostgresCheckpointStore",
    "PostgresMemoryStore",
    "PostgresSessionMetadataStore",
    "open_postgres_storage",
    "postgres_storage",
]

_T = TypeVar("_T")
_LOCK_KEY = 0x5350_4149
_SCHEMA: tuple[LiteralString, ...] = (
    "CREATE TABLE IF NOT EXISTS {memory} (name text PRIMARY KEY, content text NOT NULL, "
    "updated_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS {checkpoints} (seq bigserial PRIMARY KEY, session text NOT NULL, id text NOT NULL, "
    "data jsonb NOT NULL, UNIQUE (session, id))",
    "CREATE TABLE IF NOT EXISTS {sessions} (id text PRIMARY KEY, data jsonb NOT NULL)",
)


class _Tables:
    def __init__(self, schema: str | None) -> None:
        def name(table: str) -> Identifier:
            return Identifier(schema, table) if schema else Identifier(table)

        self.names = {
            "memory": name("deep_memory"),
            "checkpoints": name("deep_checkpoints"),
            "sessions": name("deep_sessions"),
        }

    def sql(self, statement: LiteralString) -> Composed:
        return SQL(statement).format(**self.names)


class PostgresMemoryStore:
    """The agents' memories (MEMORY.md texts) in `deep_memory`; `compare_and_swap` is one conditional statement."""

    def __init__(self, database: PostgresHistoryDatabase) -> None:
        self._database = database
        self._tables = _Tables(database.tables.schema)
        self._ready = False

    @property
    def url(self) -> str:
        return self._database.url

    async def _ensure(self, conn: psycopg.AsyncConnection[tuple[Any, ...]]) -> None:
        if not self._ready:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                for statement in _SCHEMA:
                    await conn.execute(self._tables.sql(statement))
            self._ready = True

    async def read(self, agent_name: str) -> str | None:
        check_agent_name(agent_name)
        async with self._database.connection() as conn:
            await self._ensure(conn)
            cursor = await conn.execute(self._tables.sql("SELECT content FROM {memory} WHERE name = %s"), (agent_name,))
            row = await cursor.fetchone()
        return None if row is None else str(row[0])

    async def compare_and_swap(self, agent_name: str, expected: str | None, content: str) -> bool:
        check_agent_name(agent_name)
        async with self._database.connection() as conn:
            await self._ensure(conn)
            if expected is None:
                statement = self._tables.sql(
                    "INSERT INTO {memory} (name, content) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING"
                )
                cursor = await conn.execute(statement, (agent_name, content))
            else:
                statement = self._tables.sql(
                    "UPDATE {memory} SET content = %s, updated_at = now() WHERE name = %s AND content = %s"
                )
                cursor = await conn.execute(statement, (content, agent_name, expected))
            return cursor.rowcount == 1

    async def names(self) -> list[str]:
        async with self._database.connection() as conn:
            await self._ensure(conn)
            cursor = await conn.execute(self._tables.sql("SELECT name FROM {memory} ORDER BY name"))
            return [str(r[0]) for r in await cursor.fetchall()]


class _SyncTables:
    """A small sync connection pool (checkpoints run in worker threads), opened on first use."""

    def __init__(self, dsn: str, schema: str | None, *, max_size: int = 2, timeout: float = 30.0) -> None:
        self.dsn = dsn
        self.tables = _Tables(schema)
        self._max_size = max_size
        self._timeout = timeout
        self._pool: ConnectionPool[Connection[tuple[Any, ...]]] | None = None
        self._lock = threading.Lock()

    def run(self, operation: Callable[[Connection[tuple[Any, ...]]], _T]) -> _T:
        try:
            with self._open().connection() as conn:
                return operation(conn)
        except PoolTimeout as exc:
            raise StorageError(f"no connection to {redact_url(self.dsn)} within {self._timeout}s: {exc}") from exc
        except psycopg.Error as exc:
            raise StorageError(f"{redact_url(self.dsn)}: {type(exc).__name__}: {str(exc).strip()[:500]}") from exc

    def _open(self) -> ConnectionPool[Connection[tuple[Any, ...]]]:
        with self._lock:
            if self._pool is None:
                self._create_schema()  # on a direct connection: an unreachable server fails now, not after `timeout`
                pool: ConnectionPool[Connection[tuple[Any, ...]]] = ConnectionPool(
                    self.dsn,
                    min_size=0,
                    max_size=self._max_size,
                    timeout=self._timeout,
                    open=False,
                    kwargs={"autocommit": True},
                )
                pool.open(wait=False)
                self._pool = pool
            return self._pool

    def _create_schema(self) -> None:
        options = first_connect_options(self.dsn, {"autocommit": True}, self._timeout)
        try:
            conn = Connection.connect(self.dsn, **options)
        except psycopg.OperationalError as exc:
            raise StorageError(unreachable_message(redact_url(self.dsn), self.dsn, exc)) from exc
        with conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            for statement in _SCHEMA:
                conn.execute(self.tables.sql(statement))

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


class PostgresCheckpointStore:
    """The checkpoints of one session, rows of `deep_checkpoints` (oldest first)."""

    def __init__(self, tables: _SyncTables, session_id: str) -> None:
        self._tables = tables
        self._session_id = session_id

    @property
    def session_id(self) -> str:
        return self._session_id

    def _rows(self, statement: LiteralString, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._tables.run(lambda conn: conn.execute(self._tables.tables.sql(statement), params).fetchall())

    def list(self) -> list[Checkpoint]:
        rows = self._rows("SELECT data FROM {checkpoints} WHERE session = %s ORDER BY seq", (self._session_id,))
        return [Checkpoint.from_json(_json(r[0])) for r in rows]

    def get(self, checkpoint_id: str) -> Checkpoint:
        validate_checkpoint_id(checkpoint_id)
        rows = self._rows(
            "SELECT data FROM {checkpoints} WHERE session = %s AND id = %s", (self._session_id, checkpoint_id)
        )
        if not rows:
            raise CheckpointNotFoundError(f"no checkpoint {checkpoint_id!r} in session {self._session_id!r}")
        return Checkpoint.from_json(_json(rows[0][0]))

    def save(self, checkpoint: Checkpoint) -> None:
        """Add `checkpoint`, or replace the one with its id (which then counts as the newest)."""
        validate_checkpoint_id(checkpoint.id)
        data = json.dumps(checkpoint.to_json())
        tables = self._tables.tables

        def save(conn: Connection[tuple[Any, ...]]) -> None:
            with conn.transaction():
                conn.execute(
                    tables.sql("DELETE FROM {checkpoints} WHERE session = %s AND id = %s"),
                    (self._session_id, checkpoint.id),
                )
                conn.execute(
                    tables.sql("INSERT INTO {checkpoints} (session, id, data) VALUES (%s, %s, %s::jsonb)"),
                    (self._session_id, checkpoint.id, data),
                )

        self._tables.run(save)

    def delete(self, checkpoint_id: str) -> None:
        validate_checkpoint_id(checkpoint_id)
        statement = self._tables.tables.sql("DELETE FROM {checkpoints} WHERE session = %s AND id = %s")
        deleted = self._tables.run(lambda conn: conn.execute(statement, (self._session_id, checkpoint_id)).rowcount)
        if not deleted:
            raise CheckpointNotFoundError(f"no checkpoint {checkpoint_id!r} in session {self._session_id!r}")

    def prune(self, keep: int) -> int:
        """Delete the oldest automatic checkpoints beyond the newest `keep` (one statement); returns how many."""
        if keep < 0:
            raise ValueError(f"keep must be >= 0, got {keep}")
        statement = self._tables.tables.sql(
            "DELETE FROM {checkpoints} WHERE seq IN (SELECT seq FROM {checkpoints} "
            "WHERE session = %s AND (data->>'auto')::boolean ORDER BY seq DESC OFFSET %s)"
        )
        return self._tables.run(lambda conn: conn.execute(statement, (self._session_id, keep)).rowcount)


class PostgresSessionMetadataStore:
    """Sessions' metadata as rows of `deep_sessions` (jsonb objects)."""

    def __init__(self, tables: _SyncTables) -> None:
        self._tables = tables

    def get(self, session_id: str) -> dict[str, str] | None:
        sql = self._tables.tables.sql("SELECT data FROM {sessions} WHERE id = %s")
        rows = self._tables.run(lambda conn: conn.execute(sql, (session_id,)).fetchall())
        return {str(k): str(v) for k, v in _json(rows[0][0]).items()} if rows else None

    def create(self, session_id: str, data: dict[str, str]) -> bool:
        sql = self._tables.tables.sql("INSERT INTO {sessions} (id, data) VALUES (%s, %s::jsonb) ON CONFLICT DO NOTHING")
        return self._tables.run(lambda conn: conn.execute(sql, (session_id, json.dumps(data))).rowcount) == 1

    def delete(self, session_id: str) -> None:
        sql = self._tables.tables.sql("DELETE FROM {sessions} WHERE id = %s")
        self._tables.run(lambda conn: conn.execute(sql, (session_id,)))

    def ids(self) -> list[str]:
        sql = self._tables.tables.sql("SELECT id FROM {sessions} ORDER BY id")
        return [str(r[0]) for r in self._tables.run(lambda conn: conn.execute(sql).fetchall())]

    def items(self) -> dict[str, dict[str, str]]:
        """Every session's metadata, by session id (one query: what a listing needs)."""
        sql = self._tables.tables.sql("SELECT id, data FROM {sessions} ORDER BY id")
        rows = self._tables.run(lambda conn: conn.execute(sql).fetchall())
        return {str(r[0]): {str(k): str(v) for k, v in _json(r[1]).items()} for r in rows}


def _json(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value if isinstance(value, dict) else json.loads(value))  # jsonb: a dict already


def postgres_storage(url: str, *, schema: str | None = None, checkpoint_pool_size: int = 2, **options: Any) -> Storage:
    """Histories, memories and checkpoints in one PostgreSQL database (`options`: `PostgresHistoryDatabase`'s)."""
    history = PostgresHistoryDatabase(url, schema=schema, **options)
    sync_tables = _SyncTables(url, schema, max_size=checkpoint_pool_size)
    return Storage(
        history.url,
        history,
        PostgresMemoryStore(history),
        lambda session_id: PostgresCheckpointStore(sync_tables, session_id),
        on_close=[sync_tables.close],
        session_metadata=PostgresSessionMetadataStore(sync_tables),
    )


open_postgres_storage = postgres_storage
"""What `open_storage('postgresql://...')` calls."""
