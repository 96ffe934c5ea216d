"""The harness's storage on PostgreSQL: memories (compare-and-swap across handles) and checkpoints, one URL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import anyio.to_thread
import pytest

from pydantic_deep.checkpoints._store import Checkpoint, CheckpointNotFoundError
from pydantic_deep.storage import Storage, open_storage
from pydantic_deep.storage._postgres import PostgresCheckpointStore, PostgresMemoryStore, postgres_storage
from summarization_pydantic_ai.store._postgres import PostgresHistoryDatabase


def _checkpoint(checkpoint_id: str, *, auto: bool, session: str = "s") -> Checkpoint:
    return Checkpoint(checkpoint_id, session, None if auto else checkpoint_id, None, 0, datetime.now(UTC), auto)


async def test_one_url_opens_histories_memories_and_checkpoints(postgres_dsn: str) -> None:
    storage = open_storage(postgres_dsn)
    assert isinstance(storage, Storage)
    assert isinstance(storage.history, PostgresHistoryDatabase)
    assert isinstance(storage.memory, PostgresMemoryStore)
    assert isinstance(storage.checkpoints("s"), PostgresCheckpointStore)
    await storage.close()


async def test_memory_compare_and_swap_never_loses_an_edit(postgres_dsn: str) -> None:
    one, two = postgres_storage(postgres_dsn), postgres_storage(postgres_dsn)
    assert await one.memory.read("main") is None
    assert await one.memory.compare_and_swap("main", None, "v1")
    assert not await two.memory.compare_and_swap("main", None, "other v1")  # created meanwhile
    assert await two.memory.read("main") == "v1"
    assert await two.memory.compare_and_swap("main", "v1", "v2")
    assert not await one.memory.compare_and_swap("main", "v1", "lost update")
    assert await one.memory.read("main") == "v2"

    async def add(storage: Storage, line: str) -> None:  # read, change, retry on False: as AgentMemoryToolset does
        while True:
            current = await storage.memory.read("log")
            if await storage.memory.compare_and_swap("log", current, (current or "") + line + "\n"):
                return

    await asyncio.gather(*(add(one if i % 2 else two, f"line {i}") for i in range(20)))
    lines = (await one.memory.read("log") or "").splitlines()
    assert sorted(lines) == sorted(f"line {i}" for i in range(20))
    assert await one.memory.names() == ["log", "main"]
    await one.close()
    await two.close()


async def test_checkpoints_are_kept_per_session_and_pruned_oldest_first(postgres_dsn: str) -> None:
    storage = postgres_storage(postgres_dsn)
    store, other = storage.checkpoints("s"), storage.checkpoints("t")

    def fill() -> None:
        for i in range(5):
            store.save(_checkpoint(f"auto-{i}", auto=True))
        store.save(_checkpoint("named", auto=False))
        other.save(_checkpoint("auto-0", auto=True, session="t"))

    await anyio.to_thread.run_sync(fill)
    assert [c.id for c in store.list()] == [*(f"auto-{i}" for i in range(5)), "named"]
    assert store.get("named").name == "named"
    assert store.prune(2) == 3
    assert [c.id for c in store.list()] == ["auto-3", "auto-4", "named"]
    assert [c.id for c in other.list()] == ["auto-0"]
    store.save(_checkpoint("auto-3", auto=True))  # saved again: replaced, and now the newest
    assert [c.id for c in store.list()] == ["auto-4", "named", "auto-3"]
    store.delete("named")
    with pytest.raises(CheckpointNotFoundError):
        store.get("named")
    with pytest.raises(CheckpointNotFoundError):
        store.delete("named")
    await storage.close()
