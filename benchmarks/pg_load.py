"""Load test of the PostgreSQL history store: many worker processes, many concurrent sessions, a scripted agent.

Run from the repository root (needs the PostgreSQL server binaries: a throwaway cluster is started on a loopback
port and removed afterwards; `--dsn` uses a server of yours, which must be empty of other sessions):

    python benchmarks/pg_load.py                    # 8 processes x 50 sessions x 20 turns; writes docs/benchmarks.md
    python benchmarks/pg_load.py --no-write --processes 2 --sessions 5 --turns 3

Every turn is what a stateless web worker does: load the session's working context from the store, then
`Agent.run` with `ContextManagerMiddleware(history_store=<the session's PostgresHistoryStore>)` and a
`FunctionModel` that calls one tool and then answers (4 messages a turn, recorded by the middleware in 3 appends).
Afterwards every session is checked: all of its messages, in order, none twice, none lost. Throughput is appends
(committed append calls) per second of wall-clock time; latency is the time of each `append` call, as the
middleware awaits it (pool wait included).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages, from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from _common import environment, write_section
from pg_cluster import throwaway_cluster
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import ContextManagerMiddleware, get_message_id
from summarization_pydantic_ai.store import open_database

SECTION = "postgresql-load"


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call `lookup` once per turn, then answer quoting the prompt."""
    last = messages[-1]
    prompt = next((str(p.content) for m in reversed(messages) for p in m.parts if isinstance(p, UserPromptPart)), "?")
    if isinstance(last, ModelRequest) and any(isinstance(p, UserPromptPart) for p in last.parts):
        return ModelResponse(parts=[ToolCallPart("lookup", {"q": prompt})])
    return ModelResponse(parts=[TextPart(f"answer to {prompt}")])


async def _lookup(q: str) -> str:
    """A tool the scripted model calls."""
    return f"result for {q}"


@dataclass
class WorkerResult:
    latencies: list[float] = field(default_factory=list[float])
    turns: int = 0
    errors: list[str] = field(default_factory=list[str])


async def _session(database: Any, name: str, turns: int, result: WorkerResult) -> None:
    store = database.session(name)
    timed_append = store.append

    async def append(messages: Sequence[ModelMessage]) -> int:
        started = time.perf_counter()
        written = await timed_append(messages)
        result.latencies.append(time.perf_counter() - started)
        return written

    store.append = append  # the middleware's appends, timed
    middleware = ContextManagerMiddleware(max_tokens=1_000_000, summarization_model=None, history_store=store)
    agent = Agent(FunctionModel(_model), capabilities=[middleware], tools=[_lookup])
    for turn in range(turns):
        history = await store.load()  # a stateless worker: the store is the only memory of the session
        await agent.run(f"{name} turn {turn}", message_history=history or None)
        result.turns += 1


async def _worker_main(dsn: str, worker: int, sessions: int, turns: int, pool_size: int) -> WorkerResult:
    database = open_database(dsn, max_size=pool_size)
    result = WorkerResult()
    outcomes = await asyncio.gather(
        *(_session(database, f"w{worker}-s{i}", turns, result) for i in range(sessions)), return_exceptions=True
    )
    result.errors = [repr(o) for o in outcomes if isinstance(o, BaseException)]
    await database.close()
    return result


def _worker(dsn: str, worker: int, sessions: int, turns: int, pool_size: int, queue: Any, go: Any) -> None:
    queue.put("ready")  # imported and started: the clock starts when every worker is
    go.wait()
    queue.put(asyncio.run(_worker_main(dsn, worker, sessions, turns, pool_size)))


@dataclass
class Check:
    sessions: int = 0
    complete: int = 0
    messages: int = 0
    duplicates: int = 0
    lost: int = 0
    out_of_order: int = 0
    problems: list[str] = field(default_factory=list[str])


def _expected_kinds(turns: int) -> list[str]:
    return ["prompt", "call", "return", "answer"] * turns


def _kind(message: ModelMessage) -> str:
    part = message.parts[0]
    return {UserPromptPart: "prompt", ToolCallPart: "call", ToolReturnPart: "return", TextPart: "answer"}.get(
        type(part), type(part).__name__
    )


async def check_sessions(dsn: str, names: list[str], turns: int) -> Check:
    """Every session: 4 messages a turn, the turns' prompts in order, each message once."""
    database = open_database(dsn)
    check = Check(sessions=len(names))
    for name in names:
        messages = await database.session(name).load_all()
        ids = [get_message_id(m) for m in messages]
        check.messages += len(messages)
        check.duplicates += len(ids) - len(set(ids))
        prompts = [str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
        expected_prompts = [f"{name} turn {t}" for t in range(turns)]
        check.lost += max(0, 4 * turns - len(set(ids)))
        if prompts != expected_prompts or [_kind(m) for m in messages] != _expected_kinds(turns):
            check.out_of_order += 1
            check.problems.append(f"{name}: {len(messages)} messages, prompts {prompts[:3]}...")
        else:
            check.complete += 1
    found = {s.session_id: s.messages for s in await database.sessions()}
    check.lost += sum(4 * turns for name in names if name not in found)
    await database.close()
    return check


@dataclass
class LoadResult:
    processes: int
    sessions: int
    turns: int
    elapsed: float
    appends: int
    latencies: list[float]
    check: Check
    errors: list[str]

    @property
    def throughput(self) -> float:
        return self.appends / self.elapsed

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    @property
    def ok(self) -> bool:
        c = self.check
        return not self.errors and c.complete == c.sessions and not (c.duplicates or c.lost or c.out_of_order)


def run_load(dsn: str, processes: int, sessions: int, turns: int, pool_size: int = 10) -> LoadResult:
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no state shared with this one
    queue, go = context.Queue(), context.Event()
    workers = [
        context.Process(target=_worker, args=(dsn, w, sessions, turns, pool_size, queue, go)) for w in range(processes)
    ]
    asyncio.run(_prepare(dsn))
    for worker in workers:
        worker.start()
    assert [queue.get(timeout=300) for _ in workers] == ["ready"] * processes
    started = time.perf_counter()
    go.set()
    results: list[WorkerResult] = [queue.get(timeout=1800) for _ in workers]
    elapsed = time.perf_counter() - started
    for worker in workers:
        worker.join(60)
    names = [f"w{w}-s{i}" for w in range(processes) for i in range(sessions)]
    check = asyncio.run(check_sessions(dsn, names, turns))
    latencies = [x for r in results for x in r.latencies]
    errors = [e for r in results for e in r.errors] + [
        f"worker exit code {w.exitcode}" for w in workers if w.exitcode != 0
    ]
    return LoadResult(processes, sessions, turns, elapsed, len(latencies), latencies, check, errors)


async def _prepare(dsn: str) -> None:
    """Create the schema before the clock starts (the workers would otherwise wait for the first one's migration)."""
    database = open_database(dsn)
    await database.sessions()
    await database.close()


def markdown_lines(result: LoadResult, environment: str) -> list[str]:
    c = result.check
    ms = 1000
    return [
        "## PostgreSQL: load test (issue 14)",
        "",
        f"{result.processes} worker processes x {result.sessions} concurrent sessions each x {result.turns} turns "
        "per session, through `Agent.run` with `ContextManagerMiddleware(history_store=PostgresHistoryStore)` and a "
        "scripted `FunctionModel` (a tool call, its return, an answer: 4 messages a turn in 3 appends). Each turn "
        "first loads the session's working context from the store, as a stateless web worker would. "
        "Produced by `python benchmarks/pg_load.py`.",
        "",
        "| sessions | turns | appends | wall time | throughput | append p50 | append p99 |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {c.sessions:,} | {c.sessions * result.turns:,} | {result.appends:,} | {result.elapsed:.1f} s "
        f"| {result.throughput:,.0f} appends/s | {result.percentile(0.5) * ms:.1f} ms "
        f"| {result.percentile(0.99) * ms:.1f} ms |",
        "",
        f"Afterwards: {c.complete:,} of {c.sessions:,} sessions complete and in order, {c.messages:,} messages, "
        f"{c.duplicates} duplicates, {c.lost} lost, {c.out_of_order} out of order; "
        f"{len(result.errors)} worker errors. {'All checks passed.' if result.ok else 'CHECKS FAILED.'}",
        "",
        f"- Environment: {environment}",
        "- The server is a throwaway cluster on the same machine (loopback TCP, PostgreSQL defaults: fsync and "
        "synchronous commit on); the clients and the server share its cores, so the figures are those of the "
        "whole system, Python agent runs included, not of PostgreSQL alone. An append's latency is timed around "
        "`await store.append(...)` in an event loop running 50 sessions' agent runs: it includes the wait for a "
        "pooled connection (10 per process) and for the loop itself, so where busy processes outnumber the cores "
        "it mostly measures CPU starvation.",
        "",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=50, help="concurrent sessions per process")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--pool-size", type=int, default=10, help="connections per process")
    parser.add_argument("--dsn", help="use this server instead of a throwaway cluster")
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)

    def run(dsn: str) -> LoadResult:
        return run_load(dsn, args.processes, args.sessions, args.turns, args.pool_size)

    if args.dsn:
        result = run(args.dsn)
    else:
        with throwaway_cluster(durable=True, max_connections=max(100, args.processes * args.pool_size + 20)) as dsn:
            result = run(dsn)
    lines = markdown_lines(result, environment())
    print("\n".join(lines))
    for problem in [*result.errors, *result.check.problems][:20]:
        print("  ", problem, file=sys.stderr)
    if not args.no_write:
        write_section(args.output, SECTION, lines)
        print(f"wrote {args.output}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
