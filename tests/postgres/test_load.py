"""The load test of `benchmarks/pg_load.py`, small: concurrent sessions through the middleware and a scripted agent
leave every session complete, in order, without duplicates; any worker may continue any session."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

from summarization_pydantic_ai import ContextManagerMiddleware
from summarization_pydantic_ai.store import open_database

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
pg_load: Any = pytest.importorskip("pg_load")


async def test_concurrent_sessions_of_two_workers_are_complete_and_in_order(postgres_dsn: str) -> None:
    results = await asyncio.gather(*(pg_load._worker_main(postgres_dsn, w, 6, 3, 3) for w in range(2)))
    assert [r.errors for r in results] == [[], []]
    assert sum(len(r.latencies) for r in results) == 2 * 6 * 3 * 3  # 3 appends a turn
    names = [f"w{w}-s{i}" for w in range(2) for i in range(6)]
    check = await pg_load.check_sessions(postgres_dsn, names, 3)
    assert (check.complete, check.duplicates, check.lost, check.out_of_order) == (12, 0, 0, 0), check.problems
    assert check.messages == 12 * 3 * 4


async def test_any_worker_continues_any_session(postgres_dsn: str) -> None:
    workers = [open_database(postgres_dsn) for _ in range(3)]
    for turn in range(6):
        store = workers[turn % 3].session("shared")  # each turn on another worker, as behind a load balancer
        middleware = ContextManagerMiddleware(max_tokens=1_000_000, summarization_model=None, history_store=store)
        agent = Agent(FunctionModel(pg_load._model), capabilities=[middleware], tools=[pg_load._lookup])
        history = await store.load()
        await agent.run(f"shared turn {turn}", message_history=history or None)
    check = await pg_load.check_sessions(postgres_dsn, ["shared"], 6)
    assert (check.complete, check.duplicates, check.lost) == (1, 0, 0), check.problems
    for database in workers:
        await database.close()


@pytest.mark.slow
def test_worker_processes_leave_every_session_complete(postgres_dsn: str) -> None:
    result = pg_load.run_load(postgres_dsn, processes=3, sessions=8, turns=4, pool_size=4)
    assert result.errors == []
    assert result.ok, result.check.problems
    assert result.appends == 3 * 8 * 4 * 3
    assert result.percentile(0.99) >= result.percentile(0.5) > 0
