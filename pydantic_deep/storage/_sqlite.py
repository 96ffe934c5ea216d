"""Memories and checkpoints in the SQLite file of the histories (tables `deep_memory`, `deep_checkpoints`)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread

from ..checkpoints._store import Checkpoint, CheckpointNotFoundError, validate_checkpoint_id
from ..memory._storage import check_agent_name
from ._protocols import StorageError

__all__ = ["SQLiteCheckpointStore", "SQLiteHarnessTables", "SQLiteMemoryStore", "SQLiteSessionMetadataStore"]

_T = TypeVar("_T")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS deep_memory(name TEXT PRIMARY KEY, content TEXT NOT NULL, updated_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS deep_checkpoints(seq INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL, "
    "id TEXT NOT NULL, data TEXT NOT NULL, UNIQUE(session, id))",
    "CREATE TABLE IF NOT EXISTS deep_sessions(id TEXT PRIMARY KEY, data TEXT NOT NULL)",
)


class SQLiteHarnessTables:
    """One connection (WAL, shared by the memory and checkpoint stores of a storage) and its tables."""

    def __init__(self, path: Path, *, busy_timeout: float = 30.0) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._lock:
            try:
                if self._db is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    db = sqlite3.connect(
                        self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
                    )
                    db.execute("PRAGMA journal_mode=WAL")
                    for statement in _SCHEMA:
                        db.execute(statement)
                    self._db = db
                return operation(self._db)
            except sqlite3.Error as exc:
                if self._db is not None and self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StorageError(f"sqlite:///{self.path}: {exc}") from exc

    def rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        return self.run(lambda db: db.execute(sql, params).fetchall())

    def row(self, sql: str, params: tuple[object, ...] = ()) -> tuple[Any, ...] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def close(self) -> None:
        with self._lock:
            db, self._db = self._db, None
            if db is not None:
                db.close()


class SQLiteMemoryStore:
    def __init__(self, tables: SQLiteHarnessTables) -> None:
        self._tables = tables

    @property
    def url(self) -> str:
        return f"sqlite:///{self._tables.path}"

    async def read(self, agent_name: str) -> str | None:
        check_agent_name(agent_name)
        row = await anyio.to_thread.run_sync(
            self._tables.row, "SELECT content FROM deep_memory WHERE name = ?", (agent_name,)
        )
        return None if row is None else str(row[0])

    async def compare_and_swap(self, agent_name: str, expected: str | None, content: str) -> bool:
        check_agent_name(agent_name)

        def swap(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT content FROM deep_memory WHERE name = ?", (agent_name,)).fetchone()
            if (None if row is None else row[0]) != expected:
                db.execute("ROLLBACK")
                return False
            db.execute(
                "INSERT OR REPLACE INTO deep_memory(name, content, updated_at) VALUES (?, ?, ?)",
                (agent_name, content, datetime.now(UTC).isoformat()),
            )
            db.execute("COMMIT")
            return True

        return await anyio.to_thread.run_sync(self._tables.run, swap)

    async def names(self) -> list[str]:
        rows = await anyio.to_thread.run_sync(self._tables.rows, "SELECT name FROM deep_memory ORDER BY name")
        return [str(r[0]) for r in rows]


class SQLiteCheckpointStore:
    """The checkpoints of one session, rows of `deep_checkpoints` (oldest first)."""

    def __init__(self, tables: SQLiteHarnessTables, session_id: str) -> None:
        self._tables = tables
        self._session_id = session_id

    @property
    def session_id(self) -> str:
        return self._session_id

    def list(self) -> list[Checkpoint]:
        rows = self._tables.rows(
            "SELECT data FROM deep_checkpoints WHERE session = ? ORDER BY seq", (self._session_id,)
        )
        return [Checkpoint.from_json(json.loads(r[0])) for r in rows]

    def get(self, checkpoint_id: str) -> Checkpoint:
        validate_checkpoint_id(checkpoint_id)
        row = self._tables.row(
            "SELECT data FROM deep_checkpoints WHERE session = ? AND id = ?", (self._session_id, checkpoint_id)
        )
        if row is None:
            raise CheckpointNotFoundError(f"no checkpoint {checkpoint_id!r} in session {self._session_id!r}")
        return Checkpoint.from_json(json.loads(row[0]))

    def save(self, checkpoint: Checkpoint) -> None:
        validate_checkpoint_id(checkpoint.id)
        data = json.dumps(checkpoint.to_json())

        def save(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM deep_checkpoints WHERE session = ? AND id = ?", (self._session_id, checkpoint.id))
            db.execute(
                "INSERT INTO deep_checkpoints(session, id, data) VALUES (?, ?, ?)",
                (self._session_id, checkpoint.id, data),
            )
            db.execute("COMMIT")

        self._tables.run(save)

    def delete(self, checkpoint_id: str) -> None:
        validate_checkpoint_id(checkpoint_id)
        deleted = self._tables.run(
            lambda db: (
                db.execute(
                    "DELETE FROM deep_checkpoints WHERE session = ? AND id = ?", (self._session_id, checkpoint_id)
                ).rowcount
            )
        )
        if not deleted:
            raise CheckpointNotFoundError(f"no checkpoint {checkpoint_id!r} in session {self._session_id!r}")

    def prune(self, keep: int) -> int:
        if keep < 0:
            raise ValueError(f"keep must be >= 0, got {keep}")
        auto = [c.id for c in self.list() if c.auto]
        drop = auto[: max(len(auto) - keep, 0)]
        for checkpoint_id in drop:
            self.delete(checkpoint_id)
        return len(drop)


class SQLiteSessionMetadataStore:
    """Sessions' metadata as rows of `deep_sessions` (JSON objects)."""

    def __init__(self, tables: SQLiteHarnessTables) -> None:
        self._tables = tables

    def get(self, session_id: str) -> dict[str, str] | None:
        row = self._tables.row("SELECT data FROM deep_sessions WHERE id = ?", (session_id,))
        return None if row is None else dict(json.loads(row[0]))

    def create(self, session_id: str, data: dict[str, str]) -> bool:
        statement = "INSERT OR IGNORE INTO deep_sessions(id, data) VALUES (?, ?)"
        return self._tables.run(lambda db: db.execute(statement, (session_id, json.dumps(data))).rowcount) == 1

    def delete(self, session_id: str) -> None:
        self._tables.run(lambda db: db.execute("DELETE FROM deep_sessions WHERE id = ?", (session_id,)))

    def ids(self) -> list[str]:
        return [str(r[0]) for r in self._tables.rows("SELECT id FROM deep_sessions ORDER BY id")]

    def items(self) -> dict[str, dict[str, str]]:
        """Every session's metadata, by session id (one query: what a listing needs)."""
        rows = self._tables.rows("SELECT id, data FROM deep_sessions ORDER BY id")
        return {str(r[0]): {str(k): str(v) for k, v in json.loads(r[1]).items()} for r in rows}
