"""History stores (issue 14): append, load and search against history length, for `file://` and `sqlite:///`.

Run by `benchmarks/run.py`, or alone: `python benchmarks/stores.py` (prints the section; `--quick` for fewer
timed calls). PostgreSQL has its own load test (see "Deploying at scale").

For each store and history length (1,000 / 10,000 / 50,000 messages, written in batches of 1,000 first):

- append: one turn (2 new messages) appended to the session, as the middleware does per request;
- load: `load()` of the whole working context (no compaction: every message);
- search: a query for a word in about 1% of the messages, 10 best hits, and for a rare word (3 messages); both
  stores query an FTS5 index (the file store's lives beside messages.json: built by the first search, timed on its
  own, then caught up with what was appended).

Medians of the timed calls; the file is on the machine's temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from _common import Timing, build_history, fmt_time
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from summarization_pydantic_ai import ensure_message_id
from summarization_pydantic_ai.store import HistoryDatabase, open_database

SIZES = (1_000, 10_000, 50_000)
STORES = ("file", "sqlite")
FILL_BATCH = 1_000
COMMON_WORD = "zanzibar"
RARE_WORD = "kestrel-rotator"


@dataclass
class StoreRow:
    store: str
    size: int
    append: Timing
    load: Timing
    first_search: float
    search: Timing
    rare: Timing


def _history(size: int) -> tuple[list[ModelMessage], list[ModelMessage]]:
    """`size` messages (1% of the requests mention `COMMON_WORD`, 3 mention `RARE_WORD`) and 400 more to append."""
    history, stream = build_history(size - 1)
    rare = {size // 7, size // 3, size // 2}
    for i, message in enumerate(history):
        if i % 100 == 0 and isinstance(message, ModelRequest):
            message.parts = [*message.parts, UserPromptPart(f"a note about {COMMON_WORD}")]
        if i in rare and isinstance(message, ModelRequest):
            message.parts = [*message.parts, UserPromptPart(f"the {RARE_WORD} job failed")]
        ensure_message_id(message)
    more = [next(stream) for _ in range(400)]
    for message in more:
        ensure_message_id(message)
    return history, more


def _database(kind: str, folder: Path) -> HistoryDatabase:
    return open_database((folder / "sessions").as_uri() if kind == "file" else f"sqlite:///{folder / 'h.db'}")


async def _timed(calls: int, action: Callable[[int], Awaitable[object]]) -> Timing:
    samples: list[float] = []
    for i in range(calls):
        gc.collect()
        started = time.perf_counter()
        await action(i)
        samples.append(time.perf_counter() - started)
    return Timing(samples)


async def measure(kind: str, size: int, calls: int) -> StoreRow:
    history, more = _history(size)
    with tempfile.TemporaryDirectory() as folder:
        database = _database(kind, Path(folder))
        store = database.session("bench")
        for start in range(0, len(history), FILL_BATCH):
            await store.append(history[start : start + FILL_BATCH])
        appended = await _timed(calls, lambda i: store.append(more[2 * i : 2 * i + 2]))
        loads = await _timed(max(3, calls // 10), lambda _: store.load())
        first = (await _timed(1, lambda _: store.search(COMMON_WORD, limit=10))).median
        searches = await _timed(max(3, calls // 4), lambda _: store.search(COMMON_WORD, limit=10))
        rare = await _timed(max(3, calls // 4), lambda _: store.search(RARE_WORD, limit=10))
        await database.close()
        if kind == "file":
            store_close = getattr(store, "close", None)
            if store_close is not None:
                store_close()
    return StoreRow(kind, size, appended, loads, first, searches, rare)


async def run_stores(quick: bool = False) -> list[StoreRow]:
    calls = 20 if quick else 100
    rows: list[StoreRow] = []
    for size in SIZES:
        for kind in STORES:
            rows.append(await measure(kind, size, calls))
            row = rows[-1]
            print(
                f"  stores: {kind} {size:,}: append {fmt_time(row.append.median)}, load {fmt_time(row.load.median)}, "
                f"first search {fmt_time(row.first_search)}, search {fmt_time(row.search.median)}, "
                f"rare {fmt_time(row.rare.median)}",
                flush=True,
            )
    return rows


def markdown_lines(rows: list[StoreRow]) -> list[str]:
    lines = [
        "## History stores: file and SQLite (issues 14 and 22)",
        "",
        "Measured by `benchmarks/stores.py`: a session of N messages in each store (written in batches of 1,000),",
        "then the median of one turn appended (2 messages), of `load()` (the whole working context: never",
        "compacted, every message), and of searches: a word in 1% of the messages (10 hits) and a rare word (3",
        "messages). Both stores search an FTS5 index: SQLite in the same file; the file store beside",
        "messages.json (`messages.json.index.sqlite`, the one the harness's history search uses), built by the",
        "first search (its own column) and caught up with the records appended since on every later one. PostgreSQL:",
        'see the load test of "Deploying at scale".',
        "",
        "| messages | store | append (2 messages) | load (all) | first search | search (1%, 10 hits) | rare word |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    lines.extend(
        f"| {row.size:,} | {row.store} | {fmt_time(row.append.median)} | {fmt_time(row.load.median)} "
        f"| {fmt_time(row.first_search)} | {fmt_time(row.search.median)} | {fmt_time(row.rare.median)} |"
        for row in rows
    )
    lines += [
        "",
        "Appends cost the same at every length in both stores (only the new records are written; SQLite also",
        "indexes them for search in the same transaction, the file store at the next search). Searches stay in the",
        "milliseconds as the history grows in both; the file store's first search builds its index (it decodes and",
        "indexes every message once, as the harness's history search does on its first query).",
        "",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print("\n".join(markdown_lines(asyncio.run(run_stores(args.quick)))))


if __name__ == "__main__":
    main()
