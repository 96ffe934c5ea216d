"""PostgreSQL measured against itself (issue 22): `PostgresHistoryStore.append` against a bare psycopg loop writing
the same rows on the same throwaway server, then a paced load test below saturation.

Run from the repository root (needs the PostgreSQL server binaries: a throwaway cluster with PostgreSQL's defaults,
fsync and synchronous commit on, is started on a loopback port and removed afterwards):

    python benchmarks/pg_baseline.py                # writes the "postgresql-baseline" section of docs/benchmarks.md
    python benchmarks/pg_baseline.py --quick --no-write

1. Baseline, in one run: (a) a bare psycopg loop that writes, per append, exactly the rows the store writes (the
   records, the searchable latest versions, the session's head) in one transaction over one connection, the rows
   computed before the clock starts; (b) `PostgresHistoryStore.append` of the same messages (a turn of an agent:
   the prompt, the tool call, the tool's result with the answer: batches of 1, 1 and 2 messages), one append after
   the other. Rounds alternate (a) and (b), each on fresh sessions; throughput in appends per second, the ratio
   (b)/(a), and against (a'), the same loop sending each transaction in one pipeline. The store's work beyond (a)
   is its own: encoding each message and its search text, checking the session's head (optimistic concurrency).
   Both sides are warm when their clocks start (30 appends each before: prepared statements, serializers).
2. Paced load: 8 processes, each appending to its own 20 sessions at a fixed offered rate (in total 100, then 200
   appends per second, spread evenly), far below saturation: latency of each append from the moment it was due to
   its commit (a late start counts), p50 and p99. Each process is warm when the clock starts, as a serving process
   is (its pool of 4 connections open, a turn appended to each of its sessions). The saturation run (as many
   appends as the system can take) is `benchmarks/pg_load.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the packages, from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import psycopg
from _common import environment, write_section
from pg_cluster import throwaway_cluster
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from summarization_pydantic_ai import ensure_message_id
from summarization_pydantic_ai.store import open_database
from summarization_pydantic_ai.store._postgres._append import searchable_row
from summarization_pydantic_ai.store._session_index import encode_record

SECTION = "postgresql-baseline"
PROCESSES = 8
SESSIONS_PER_PROCESS = 20
POOL_SIZE = 4
"""Connections per process, all open before the clock starts (a pool that grows on demand makes the first appends
wait for new connections)."""


def turn_batches(session: str, turns: int) -> Iterator[list[ModelMessage]]:
    """The appends of `turns` agent turns: [prompt], [tool call], [tool result, answer]."""
    for t in range(turns):
        call_id = f"{session}-call-{t}"
        prompt = ModelRequest(parts=[UserPromptPart(f"{session} turn {t}: check the retry logic of module_{t}.py")])
        call = ModelResponse(parts=[ToolCallPart("read_file", {"path": f"src/module_{t}.py"}, tool_call_id=call_id)])
        result = ModelRequest(
            parts=[ToolReturnPart("read_file", f"def handler_{t}(request):\n    return retry(request)\n" * 8, call_id)]
        )
        answer = ModelResponse(parts=[TextPart(f"The retry loop in module_{t}.py swallows the error; fix it so.")])
        for message in (prompt, call, result, answer):
            ensure_message_id(message)
        yield [prompt]
        yield [call]
        yield [result, answer]


# -- (a) the bare loop -------------------------------------------------------------------------------------------

_RECORDS = (
    "INSERT INTO spa_records (session, seq, message_id, position, digest, summary, data) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_MESSAGES = (
    "INSERT INTO spa_messages AS m (session, seq, position, message_id, roles, tool_names, ts, body, tsv) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector) "
    "ON CONFLICT (session, message_id) DO UPDATE SET seq = excluded.seq, roles = excluded.roles, "
    "tool_names = excluded.tool_names, ts = excluded.ts, body = excluded.body, "
    "tsv = CASE WHEN m.extra_tsv IS NULL THEN excluded.tsv ELSE excluded.tsv || m.extra_tsv END"
)
_HEAD = "UPDATE spa_sessions SET head = %s, messages = %s, bytes = bytes + %s, updated_at = now() WHERE id = %s"


@dataclass
class BareAppend:
    records: list[tuple[Any, ...]]
    messages: list[tuple[Any, ...]]
    head: tuple[Any, ...]


def bare_appends(session_id: int, batches: Sequence[list[ModelMessage]]) -> list[BareAppend]:
    """The rows the store writes for `batches`, computed before the clock starts."""
    appends: list[BareAppend] = []
    seq = 0
    for batch in batches:
        records: list[tuple[Any, ...]] = []
        messages: list[tuple[Any, ...]] = []
        for message in batch:
            seq += 1
            new = encode_record(message)
            records.append((session_id, seq, new.message_id, seq - 1, new.digest, new.summary, new.data))
            messages.append((session_id, seq, seq - 1, *searchable_row(message)))
        size = sum(len(r[6]) for r in records)
        appends.append(BareAppend(records, messages, (seq, seq, size, session_id)))
    return appends


async def run_bare(dsn: str, appends: Sequence[BareAppend], *, pipelined: bool = False) -> float:
    """Seconds to write `appends` one after the other, each in one transaction: statement after statement, or
    (`pipelined`) the whole transaction in one pipeline."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        started = time.perf_counter()
        for append in appends:
            async with contextlib.AsyncExitStack() as stack:
                if pipelined:
                    await stack.enter_async_context(conn.pipeline())
                await stack.enter_async_context(conn.transaction())
                cursor = await stack.enter_async_context(conn.cursor())
                await cursor.executemany(_RECORDS, append.records)
                await cursor.executemany(_MESSAGES, append.messages)
                await cursor.execute(_HEAD, append.head)
        return time.perf_counter() - started


async def new_sessions(dsn: str, names: Sequence[str]) -> list[int]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        ids: list[int] = []
        for name in names:
            cursor = await conn.execute("INSERT INTO spa_sessions (name) VALUES (%s) RETURNING id", (name,))
            row = await cursor.fetchone()
            assert row is not None
            ids.append(int(row[0]))
        return ids


# -- (b) the store -----------------------------------------------------------------------------------------------


async def run_store(database: Any, name: str, batches: Sequence[list[ModelMessage]]) -> float:
    store = database.session(name)
    started = time.perf_counter()
    for batch in batches:
        await store.append(batch)
    return time.perf_counter() - started


@dataclass
class Baseline:
    appends: int
    bare: list[float]
    store: list[float]
    pipelined: list[float]

    @property
    def bare_rate(self) -> float:
        return self.appends / statistics.median(self.bare)

    @property
    def store_rate(self) -> float:
        return self.appends / statistics.median(self.store)

    @property
    def pipelined_rate(self) -> float:
        return self.appends / statistics.median(self.pipelined)

    @property
    def ratio(self) -> float:
        return self.store_rate / self.bare_rate


async def baseline(dsn: str, rounds: int, turns: int) -> Baseline:
    database = open_database(dsn, max_size=2)
    await database.sessions()  # the schema, before any clock
    (warm_id,) = await new_sessions(dsn, ["warm-bare"])
    await run_bare(dsn, bare_appends(warm_id, list(turn_batches("warm-bare", 10))))  # prepared statements
    await run_store(database, "warm-store", list(turn_batches("warm-store", 10)))  # serializers, statements
    times: dict[str, list[float]] = {"bare": [], "store": [], "pipelined": []}
    appends = 3 * turns
    for r in range(rounds):
        bare_id, pipelined_id = await new_sessions(dsn, [f"bare-{r}", f"pipelined-{r}"])
        rows = bare_appends(bare_id, list(turn_batches(f"bare-{r}", turns)))
        pipelined_rows = bare_appends(pipelined_id, list(turn_batches(f"pipelined-{r}", turns)))
        batches = list(turn_batches(f"store-{r}", turns))
        sides = ["bare", "store", "pipelined"]
        for side in sides[r % 3 :] + sides[: r % 3]:  # each goes first in turn
            if side == "bare":
                times[side].append(await run_bare(dsn, rows))
            elif side == "pipelined":
                times[side].append(await run_bare(dsn, pipelined_rows, pipelined=True))
            else:
                times[side].append(await run_store(database, f"store-{r}", batches))
        rates = ", ".join(f"{side} {appends / times[side][-1]:,.0f}/s" for side in sides)
        print(f"  round {r + 1}: {rates}", flush=True)
    await database.close()
    return Baseline(appends, times["bare"], times["store"], times["pipelined"])


# -- paced load ----------------------------------------------------------------------------------------------------


async def _paced_worker(dsn: str, worker: int, rate: float, seconds: float, queue: Any, go: Any) -> list[float]:
    """Appends at `rate` per second (this process's share), round robin over its sessions; each append's latency
    from when it was due. The clock starts when every process is connected (`go` carries the start time)."""
    database = open_database(dsn, min_size=POOL_SIZE, max_size=POOL_SIZE)
    names = [f"paced-{rate * PROCESSES:.0f}-w{worker}-s{s}" for s in range(SESSIONS_PER_PROCESS)]
    streams = [turn_batches(name, 10_000) for name in names]
    for name, stream in zip(names, streams, strict=True):  # warm, as a serving process is: a turn per session
        for _ in range(3):
            await database.session(name).append(next(stream))
    queue.put("ready")
    while not go.is_set():
        await asyncio.sleep(0.01)
    start_at = go.start_at.value + worker / (rate * PROCESSES)  # the processes' appends interleave evenly
    latencies: list[float] = []
    pending: set[asyncio.Task[None]] = set()
    busy = [asyncio.Lock() for _ in names]  # a session's appends in order, as one conversation's are

    async def append(i: int, due: float) -> None:
        async with busy[i]:
            await database.session(names[i]).append(next(streams[i]))
        latencies.append(time.time() - due)

    for k in range(int(rate * seconds)):
        due = start_at + k / rate
        delay = due - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(append(k % len(names), due))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)
    await database.close()
    return latencies


@dataclass
class _Go:
    event: Any
    start_at: Any

    def is_set(self) -> bool:
        return bool(self.event.is_set())


def _paced_process(dsn: str, worker: int, rate: float, seconds: float, queue: Any, go: _Go) -> None:
    queue.put(asyncio.run(_paced_worker(dsn, worker, rate, seconds, queue, go)))


@dataclass
class Paced:
    rate: float
    seconds: float
    latencies: list[float]

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def paced(dsn: str, rate: float, seconds: float) -> Paced:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    go = _Go(context.Event(), context.Value("d", 0.0))
    workers = [
        context.Process(target=_paced_process, args=(dsn, w, rate / PROCESSES, seconds, queue, go))
        for w in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    assert [queue.get(timeout=600) for _ in workers] == ["ready"] * PROCESSES
    go.start_at.value = time.time() + 0.5
    go.event.set()
    latencies = [x for _ in workers for x in queue.get(timeout=seconds + 600)]
    for worker in workers:
        worker.join(60)
    return Paced(rate, seconds, latencies)


def markdown_lines(base: Baseline, runs: list[Paced], env: str) -> list[str]:
    ms = 1000
    lines = [
        "## PostgreSQL: the store against the server (issue 22)",
        "",
        "Produced by `python benchmarks/pg_baseline.py`, on one throwaway cluster (PostgreSQL defaults: fsync and",
        "synchronous commit on), loopback TCP. (a) is a bare psycopg loop writing, per append, exactly the rows the",
        "store writes (records, searchable latest versions, the session's head) in one transaction, the rows computed",
        "before the clock starts; (b) is `PostgresHistoryStore.append` of the same turns (batches of 1, 1 and 2",
        "messages). One connection each, appends one after the other, alternated rounds, medians.",
        "",
        "| | appends | throughput | per append |",
        "|---|---:|---:|---:|",
        f"| (a) bare psycopg | {base.appends:,} | {base.bare_rate:,.0f} appends/s | {ms / base.bare_rate:.2f} ms |",
        f"| (b) PostgresHistoryStore.append | {base.appends:,} | {base.store_rate:,.0f} appends/s "
        f"| {ms / base.store_rate:.2f} ms |",
        f"| (a') bare psycopg, each transaction in one pipeline | {base.appends:,} "
        f"| {base.pipelined_rate:,.0f} appends/s | {ms / base.pipelined_rate:.2f} ms |",
        "",
        f"**(b)/(a) = {base.ratio:.2f}** (target >= 0.6); against the pipelined loop (a'), the floor of a client",
        f"that sends a transaction in one round trip as the store does: {base.store_rate / base.pipelined_rate:.2f}.",
        "",
        f"Paced load: {PROCESSES} processes x {SESSIONS_PER_PROCESS} sessions, the offered rate fixed and spread evenly"
        " (an append's latency is from when it was due to its commit):",
        "",
        "| offered load | appends | p50 | p99 | max |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {run.rate:.0f} appends/s for {run.seconds:.0f} s | {len(run.latencies):,} "
        f"| {run.percentile(0.5) * ms:.1f} ms | {run.percentile(0.99) * ms:.1f} ms | {max(run.latencies) * ms:.1f} ms |"
        for run in runs
    ]
    lines += ["", f"- Environment: {env}", ""]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rates", default="100,200")
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    rounds, turns, seconds = (3, 100, 10.0) if args.quick else (6, 300, 30.0)
    with throwaway_cluster(durable=True, max_connections=120) as dsn:
        base = asyncio.run(baseline(dsn, rounds, turns))
        runs: list[Paced] = []
        for rate in (float(r) for r in args.rates.split(",")):
            runs.append(paced(dsn, rate, seconds))
            print(
                f"  paced {rate:.0f}/s: p50 {runs[-1].percentile(0.5) * 1000:.1f} ms, "
                f"p99 {runs[-1].percentile(0.99) * 1000:.1f} ms",
                flush=True,
            )
    lines = markdown_lines(base, runs, environment())
    print("\n".join(lines))
    if not args.no_write:
        write_section(args.output, SECTION, lines)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
