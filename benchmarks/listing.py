"""Listing sessions (issue 22): `SessionManager.list()` reads each session's catalogue, not its records.

200 sessions of 5,000 messages against 200 sessions of 50 messages, in one run, on files (messages.json), SQLite and
PostgreSQL (a throwaway cluster on a loopback port, removed afterwards). Targets: long / short <= 1.3 on every
store (the listing costs O(sessions), not O(messages)), under 150 ms for 200 sessions on files, under 50 ms on
PostgreSQL.

    python benchmarks/listing.py                      # writes its section of docs/benchmarks.md
    python benchmarks/listing.py --sessions 20 --no-write --no-postgres

Each session is an agent conversation written through its store (`append_sync` / `append` in batches of 1,000):
user prompts, answers priced by genai-prices (model and usage), tool calls with ~400-character results, and a summary
every 1,000 messages. Timed: `SessionManager(base_dir).list()` on files, `await SessionManager(base_dir,
store=storage).list_async()` on the databases (the storage opened once, as the chat does); the two sizes take turns,
after one untimed listing of each, garbage collector paused. Also timed once: a listing where one long session's
catalogue was deleted (it is rebuilt from the records: slower once).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from _common import write_section
from pg_load import environment
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from pydantic_deep import SessionManager
from pydantic_deep.storage import open_storage
from summarization_pydantic_ai import SUMMARY_METADATA_KEY, JsonHistoryStore, ensure_message_id
from summarization_pydantic_ai.store import SQLiteHistoryDatabase
from summarization_pydantic_ai.store._catalog_file import catalog_path

SECTION = "session-listing"
SIZES = (5_000, 50)
TARGET_RATIO = 1.3
TARGET_FILES_S = 0.150
TARGET_POSTGRES_S = 0.050
BATCH = 1_000


def conversation(n: int, seed: int) -> Iterator[ModelMessage]:
    """`n` messages of an agent session: prompts, priced answers, tool exchanges, a summary every 1,000."""
    for i in range(n):
        if i % 1_000 == 999:
            info = {"covers": [], "tokens_before": 90_000, "tokens_after": 9_000}
            message: ModelMessage = ModelRequest(
                parts=[CompactionPart(content=f"Summary {i} of session {seed}.", metadata={SUMMARY_METADATA_KEY: info})]
            )
        elif i % 2 == 0:
            message = (
                ModelRequest(parts=[UserPromptPart(f"Session {seed}, task {i}: fix the failing test in module {i}.")])
                if i % 10 == 0
                else ModelRequest(parts=[ToolReturnPart("read_file", "x = 1\n" * 66, tool_call_id=f"c{i - 1}")])
            )
        else:
            parts: list[Any] = [TextPart(f"Reading module {i}.")]
            if i % 10 != 9:
                parts.append(ToolCallPart("read_file", {"path": f"src/module_{i}.py"}, tool_call_id=f"c{i}"))
            usage = RequestUsage(input_tokens=2_000 + i, output_tokens=120)
            message = ModelResponse(parts=parts, model_name="gpt-4o", provider_name="openai", usage=usage)
        ensure_message_id(message)
        yield message


def batches(n: int, seed: int) -> Iterator[list[ModelMessage]]:
    stream = conversation(n, seed)
    for start in range(0, n, BATCH):
        yield [next(stream) for _ in range(min(BATCH, n - start))]


@dataclass
class Row:
    store: str
    size: int
    sessions: int
    seconds: list[float] = field(default_factory=list[float])
    first: float = 0.0
    listed: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def _fill_files(base: Path, sessions: int, size: int) -> None:
    for s in range(sessions):
        store = JsonHistoryStore(base / "sessions" / f"s{s:03d}" / "messages.json")
        for batch in batches(size, s):
            store.append_sync(batch)
        store.close()


def _fill_sqlite(path: Path, sessions: int, size: int) -> None:
    database = SQLiteHistoryDatabase(path)
    for s in range(sessions):
        store = database.session(f"s{s:03d}")
        for batch in batches(size, s):
            store.append_sync(batch)
    database.close_sync()


async def _fill_postgres(dsn: str, sessions: int, size: int) -> None:
    from summarization_pydantic_ai.store import open_database

    database = open_database(dsn, max_size=4)
    limit = asyncio.Semaphore(4)

    async def write(s: int) -> None:
        async with limit:
            store = database.session(f"s{s:03d}")
            for batch in batches(size, s):
                await store.append(batch)

    await asyncio.gather(*(write(s) for s in range(sessions)))
    await database.close()


def _timed(call: Callable[[], int]) -> tuple[float, int]:
    gc.disable()
    try:
        started = time.perf_counter()
        listed = call()
        return time.perf_counter() - started, listed
    finally:
        gc.enable()


def _alternate(rows: Sequence[Row], calls: Sequence[Callable[[], int]], rounds: int) -> None:
    for row, call in zip(rows, calls, strict=True):
        row.first, row.listed = _timed(call)  # untimed in the medians: the first listing after writing
    for _ in range(rounds):
        for row, call in zip(rows, calls, strict=True):
            seconds, row.listed = _timed(call)
            row.seconds.append(seconds)


def measure_files(root: Path, sessions: int, rounds: int) -> tuple[list[Row], float]:
    bases = {size: root / f"files-{size}" for size in SIZES}
    for size, base in bases.items():
        _fill_files(base, sessions, size)
        print(f"  files: {sessions} x {size} written", file=sys.stderr, flush=True)
    rows = [Row("files", size, sessions) for size in SIZES]
    _alternate(rows, [lambda b=bases[size]: len(SessionManager(b).list()) for size in SIZES], rounds)
    catalog_path(bases[SIZES[0]] / "sessions" / "s000" / "messages.json").unlink()
    rebuilt, _ = _timed(lambda: len(SessionManager(bases[SIZES[0]]).list()))
    return rows, rebuilt


def _database_rows(name: str, urls: dict[int, str], sessions: int, rounds: int, root: Path) -> list[Row]:
    rows = [Row(name, size, sessions) for size in SIZES]

    async def timed(manager: SessionManager) -> tuple[float, int]:
        gc.disable()
        try:
            started = time.perf_counter()
            listed = len(await manager.list_async())
            return time.perf_counter() - started, listed
        finally:
            gc.enable()

    async def run() -> None:
        managers = [SessionManager(root / f"{name}-{s}", store=open_storage(urls[s])) for s in SIZES]
        try:
            for row, manager in zip(rows, managers, strict=True):
                row.first, row.listed = await timed(manager)
            for _ in range(rounds):
                for row, manager in zip(rows, managers, strict=True):
                    seconds, row.listed = await timed(manager)
                    row.seconds.append(seconds)
        finally:
            for manager in managers:
                assert manager.storage is not None
                await manager.storage.close()

    asyncio.run(run())
    return rows


def measure_sqlite(root: Path, sessions: int, rounds: int) -> list[Row]:
    urls: dict[int, str] = {}
    for size in SIZES:
        path = root / f"sqlite-{size}.db"
        _fill_sqlite(path, sessions, size)
        urls[size] = f"sqlite:///{path}"
        print(f"  sqlite: {sessions} x {size} written", file=sys.stderr, flush=True)
    return _database_rows("sqlite", urls, sessions, rounds, root)


def measure_postgres(dsn: str, root: Path, sessions: int, rounds: int) -> list[Row]:
    import psycopg

    urls: dict[int, str] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for size in SIZES:
            conn.execute(f"CREATE DATABASE listing_{size}")  # pyright: ignore[reportArgumentType]
            parts = urlsplit(dsn)
            urls[size] = urlunsplit((parts.scheme, parts.netloc, f"/listing_{size}", parts.query, parts.fragment))
    for size in SIZES:
        asyncio.run(_fill_postgres(urls[size], sessions, size))
        print(f"  postgres: {sessions} x {size} written", file=sys.stderr, flush=True)
    return _database_rows("postgres", urls, sessions, rounds, root)


def measure_append(root: Path, rounds: int = 20) -> tuple[float, float]:
    """The median of one append of 2 messages (a priced answer and the next request) to a messages.json of 1,000,
    with the catalogue kept and without it (its two hooks made no-ops), in batches of 10 taking turns."""
    from summarization_pydantic_ai.store._catalog_file import FileCatalogWriter

    keep_prepare, keep_commit = FileCatalogWriter.prepare, FileCatalogWriter.commit
    stores = {kept: JsonHistoryStore(root / f"append-{kept}" / "messages.json") for kept in (True, False)}
    for store in stores.values():
        store.append_sync(list(conversation(1_000, 0)))
    stream = conversation(10_000_000, 1)
    timed: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for kept, store in stores.items():
            if not kept:
                FileCatalogWriter.prepare = lambda self, handle, new, known: None  # type: ignore[method-assign, assignment, return-value]
                FileCatalogWriter.commit = lambda self, pending, handle: None  # type: ignore[method-assign]
            try:
                for _ in range(10):
                    batch = [next(stream) for _ in range(2)]
                    gc.disable()
                    started = time.perf_counter()
                    store.append_sync(batch)
                    timed[kept].append(time.perf_counter() - started)
                    gc.enable()
            finally:
                FileCatalogWriter.prepare, FileCatalogWriter.commit = keep_prepare, keep_commit  # type: ignore[method-assign]
    for store in stores.values():
        store.close()
    return statistics.median(timed[True]), statistics.median(timed[False])


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def markdown_lines(
    rows: list[Row], rebuilt: float, append: tuple[float, float], env: str, load_start: float, rounds: int
) -> list[str]:
    by = {(r.store, r.size): r for r in rows}
    lines = [
        "## Listing sessions (issue 22)",
        "",
        "`SessionManager.list()` reads each session's catalogue (what the listing shows, kept by the store at every "
        "append: a sidecar beside messages.json, a row in SQLite and PostgreSQL), never its records. Produced by "
        "`python benchmarks/listing.py`.",
        "",
        "| store | sessions | messages each | median | p90 | first listing | long / short | target | met |",
        "|---|---:|---:|---:|---:|---:|---:|---|:-:|",
    ]
    for store in ("files", "sqlite", "postgres"):
        if (store, SIZES[0]) not in by:
            continue
        long, short = by[(store, SIZES[0])], by[(store, SIZES[1])]
        ratio = long.median / short.median
        absolute = {"files": TARGET_FILES_S, "postgres": TARGET_POSTGRES_S}.get(store)
        target = f"ratio <= {TARGET_RATIO}" + (f", < {_ms(absolute)}" if absolute else "")
        met = ratio <= TARGET_RATIO and (absolute is None or long.median < absolute)
        for row in (long, short):
            p90 = sorted(row.seconds)[max(0, int(len(row.seconds) * 0.9) - 1)]
            lines.append(
                f"| {store} | {row.sessions} | {row.size:,} | {_ms(row.median)} | {_ms(p90)} | {_ms(row.first)} | "
                + (f"{ratio:.2f} | {target} | {'yes' if met else 'no'} |" if row is long else "| | |")
            )
    lines += [
        "",
        f"- One long session's catalogue deleted: the next listing rebuilds it from its {SIZES[0]:,} records and "
        f"takes {_ms(rebuilt)} (once: it writes the catalogue again).",
        f"- What keeping it costs: one append of 2 messages (a priced answer and a request) to a messages.json of "
        f"1,000 takes {append[0] * 1e6:.0f} µs with the catalogue, {append[1] * 1e6:.0f} µs without it (its two "
        "hooks made no-ops; median of 200 each, in batches of 10 taking turns). SQLite and PostgreSQL write one "
        "more row in the append's transaction.",
        f"- {rounds} timed listings per row, the two sizes taking turns, after one untimed listing of each (the "
        "'first listing' column); garbage collector paused. Sessions of 50 and 5,000 messages are otherwise alike "
        "(prompts, priced answers, tool exchanges, a summary every 1,000 messages).",
        f"- Environment: {env} (load average {load_start:.1f} at the start); files on ext4 in a temporary "
        "directory; PostgreSQL: a throwaway cluster on the same machine (fsync off while filling; the listing only "
        "reads).",
        "",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="listing-") as tmp:
        root = Path(tmp)
        append = measure_append(root)
        rows, rebuilt = measure_files(root, args.sessions, args.rounds)
        rows += measure_sqlite(root, args.sessions, args.rounds)
        if not args.no_postgres:
            from pg_cluster import throwaway_cluster

            with throwaway_cluster() as dsn:
                rows += measure_postgres(dsn, root, args.sessions, args.rounds)
    lines = markdown_lines(rows, rebuilt, append, environment(), load_start, args.rounds)
    print("\n".join(lines))
    if not args.no_write:
        write_section(args.output, SECTION, lines)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
