"""`SQLiteHistoryDatabase`: many sessions in one SQLite file (WAL), searched with FTS5 in the same file; and
`SQLiteHistoryStore`, one of its sessions (the session's operations are `SQLiteSession`, in `_store.py`).

One connection per database object, used by one thread at a time (a lock); the event loop never waits on it (every
call runs in a worker thread). Other processes open their own: WAL lets them read while one writes, and writes are
serialized by SQLite's write lock (`BEGIN IMMEDIATE`, waiting up to `busy_timeout` seconds).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from .._catalog import SessionCatalog
from .._database import SearchHit, SessionSummary
from .._protocol import HistoryStoreError, validate_session_id
from ._catalog import read_catalogs
from ._schema import connect
from ._search import search_rows
from ._store import SQLiteSession

__all__ = ["SQLiteHistoryDatabase", "SQLiteHistoryStore"]

_T = TypeVar("_T")


class SQLiteHistoryDatabase:
    """The histories of many sessions in one SQLite file.

    Example:
        ```python
        database = SQLiteHistoryDatabase('history.db')
        store = database.session('chat-42')  # a SearchableHistoryStore
        await store.append(messages)
        hits = await database.search('invoice number')
        await database.close()
        ```
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False, busy_timeout: float = 30.0) -> None:
        self.path = Path(path).expanduser().resolve()
        self.fsync = fsync
        """Sync to disk at every commit (survives power loss, not just a killed process); slower."""
        self.busy_timeout = busy_timeout
        """Seconds to wait for another process's write lock before failing."""
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._stores: dict[str, SQLiteHistoryStore] = {}
        self._closed = False

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `operation` with the connection, under the lock (sync: call from a worker thread)."""
        with self._lock:
            if self._closed:
                raise HistoryStoreError(f"{self.url} was closed")
            if self._db is None:
                self._db = connect(self.path, fsync=self.fsync, busy_timeout=self.busy_timeout)
            try:
                return operation(self._db)
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                raise HistoryStoreError(f"{self.url}: {exc}") from exc

    async def run_async(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        return await anyio.to_thread.run_sync(self.run, operation)

    def session(self, session_id: str) -> SQLiteHistoryStore:
        validate_session_id(session_id)
        with self._lock:
            store = self._stores.get(session_id)
            if store is None:
                store = self._stores[session_id] = SQLiteHistoryStore(self.path, session_id, database=self)
            return store

    async def sessions(self) -> list[SessionSummary]:
        rows = await self.run_async(
            lambda db: db.execute(
                "SELECT name, messages, bytes, created_at, updated_at FROM sessions WHERE head > 0 "
                "ORDER BY updated_at DESC, name DESC"
            ).fetchall()
        )
        return [
            SessionSummary(str(r[0]), int(r[1]), int(r[2]), datetime.fromisoformat(r[3]), datetime.fromisoformat(r[4]))
            for r in rows
        ]

    async def catalog(self, session_ids: Sequence[str] | None = None) -> list[SessionCatalog]:
        """What a listing shows of every session holding a record (or of `session_ids`), most recently updated
        first: one row per session, kept by each append (see `SessionCatalog`)."""
        names = None if session_ids is None else [validate_session_id(s) for s in session_ids]
        return await self.run_async(lambda db: read_catalogs(db, names))

    async def delete_session(self, session_id: str) -> bool:
        validate_session_id(session_id)

        def delete(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT id FROM sessions WHERE name = ?", (session_id,)).fetchone()
            if row is None:
                db.execute("ROLLBACK")
                return False
            db.execute("DELETE FROM messages_fts WHERE rowid IN (SELECT rowid FROM messages WHERE session = ?)", row)
            db.execute("DELETE FROM sessions WHERE id = ?", row)  # records and messages cascade
            db.execute("COMMIT")
            return True

        return await self.run_async(delete)

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
        names = None if session_ids is None else [validate_session_id(s) for s in session_ids]
        return await self.run_async(
            lambda db: search_rows(
                db, query, names, roles=roles, tool_name=tool_name, since=since, until=until, limit=limit, offset=offset
            )
        )

    def close_sync(self) -> None:
        with self._lock:
            self._closed = True
            db, self._db = self._db, None
            if db is not None:
                db.close()

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.close_sync)


class SQLiteHistoryStore(SQLiteSession):
    """The history of one session in a SQLite file (see `SQLiteHistoryDatabase` for many sessions).

    Example:
        ```python
        store = SQLiteHistoryStore('history.db', session_id='chat-42')
        await store.append(messages)  # each message needs an id: see ensure_message_id
        history = await store.load()  # the working context, to pass as message_history
        ```
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        session_id: str = "default",
        *,
        database: SQLiteHistoryDatabase | None = None,
        fsync: bool = False,
    ) -> None:
        self._history_database = database or SQLiteHistoryDatabase(path, fsync=fsync)
        super().__init__(session_id, self._history_database, owns_database=database is None)

    @property
    def database(self) -> SQLiteHistoryDatabase:
        return self._history_database
