"""The store contract suite runs every test against every store: `file` (messages.json folders), `sqlite` and
`postgres`.

Hook for a store: a fixture named `<name>_store_target` returning a `StoreTarget` whose `open()` gives a handle
(a `HistoryDatabase`) on one fresh, empty place private to the test; calling `open()` again gives another handle on
the same place (another worker). A store that cannot run here skips with a message saying why.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from summarization_pydantic_ai.store import HistoryDatabase, open_database

STORE_NAMES = ("file", "sqlite", "postgres")


@dataclass
class StoreTarget:
    name: str
    url: str
    """What `open_database` opens (also from another process)."""
    multi_writer: bool
    """Separate handles may write one session at once (optimistic concurrency); `False` for files, whose writer
    holds a lock (another process gets `HistoryStoreLockedError`, this process shares one store per file)."""
    atomic_batches: bool = True
    """An append killed half-way leaves none of its messages (a database transaction); `False` for files, whose
    records are whole or absent one by one (a torn tail loses only the torn record, the reliability guarantee)."""
    opened: list[HistoryDatabase] = field(default_factory=list[HistoryDatabase])

    def open(self) -> HistoryDatabase:
        database = open_database(self.url)
        self.opened.append(database)
        return database

    async def close_all(self) -> None:
        for database in self.opened:
            await database.close()
        self.opened.clear()


@pytest.fixture
def file_store_target(tmp_path: Path) -> StoreTarget:
    return StoreTarget("file", (tmp_path / "sessions").as_uri(), multi_writer=False, atomic_batches=False)


@pytest.fixture
def sqlite_store_target(tmp_path: Path) -> StoreTarget:
    return StoreTarget("sqlite", f"sqlite:///{tmp_path / 'history.db'}", multi_writer=True)


@pytest.fixture
def postgres_store_target(postgres_dsn: str) -> StoreTarget:
    """An empty database of its own on the throwaway PostgreSQL server (tests/postgres_server.py)."""
    return StoreTarget("postgres", postgres_dsn, multi_writer=True)


@pytest.fixture(params=STORE_NAMES)
async def store_target(request: pytest.FixtureRequest) -> AsyncIterator[StoreTarget]:
    target: StoreTarget = request.getfixturevalue(f"{request.param}_store_target")
    yield target
    await target.close_all()


@pytest.fixture
def database(store_target: StoreTarget) -> HistoryDatabase:
    return store_target.open()
