"""Before/after comparison of the benchmarks of docs/benchmarks.md, on two checkouts of the project.

Run from the repository root (B, the code under test, defaults to this checkout):

    git worktree add /tmp/before 656549f
    python benchmarks/ab_compare.py --a /tmp/before                       # every case, CPU time
    python benchmarks/ab_compare.py --a /tmp/before mw:10000 ev:later     # some cases
    python benchmarks/ab_compare.py --a /tmp/before --callgrind proc:summ:10000   # instruction counts
    python benchmarks/ab_compare.py --list

Each case is one row of docs/benchmarks.md: a setup (not measured) and an operation repeated `--reps` times.
Every measurement runs in a fresh worker process (`--worker CASE`) whose `PYTHONPATH` starts with the checkout
being measured; the benchmark helpers (`_common.py`, `deep.py`, ...) always come from this checkout's
`benchmarks/`, so both sides run the same workload (they only use names that existed before issue 9).

Methods (the machine is shared, so wall-clock time is not used):

- `cpu` (default): the process CPU time (`time.process_time_ns`, every thread: store appends run in a worker
  thread) of each operation; the worker reports the median over its repetitions. Sides take turns A B B A ...
  for `--rounds` rounds; the figure of a side is the median of its rounds' medians, the ratio is B / A.
- `--callgrind`: `valgrind --tool=callgrind` instruction counts, repeatable under load. The worker runs with the
  instrumentation off during its setup; callgrind's client requests (a tiny C library built with `gcc`) switch
  the collection on around each measured operation only (not its untimed preparation). Reported: instructions
  per operation (with `PYTHONHASHSEED=0` on both sides).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

Op = Callable[[], Awaitable[object]]
"""One measured operation (its own untimed preparation happens in `Case.prepare`)."""


class Case:
    """A setup run once and an operation measured `reps` times; `prepare` runs untimed before each operation."""

    def __init__(self) -> None:
        self.prepare: Callable[[], Awaitable[None]] | None = None
        self.op: Op | None = None
        self.cleanup: Callable[[], Awaitable[None]] | None = None


CaseFactory = Callable[[Case, str], Awaitable[None]]
CASES: dict[str, tuple[str, CaseFactory]] = {}
REPS: dict[str, int] = {}
"""Repetitions per worker of the cases whose operation is long (or can only be first once); others: `--reps`."""


def case(name: str, row: str, reps: int | None = None) -> Callable[[CaseFactory], CaseFactory]:
    def register(factory: CaseFactory) -> CaseFactory:
        CASES[name] = (row, factory)
        if reps is not None:
            REPS[name] = reps
        return factory

    return register


# -- The cases ---------------------------------------------------------------------------------------------------------


def _history(size: int) -> tuple[list[Any], Iterator[Any]]:
    from _common import build_history

    return build_history(size)


def _processor(subject: str, size: int) -> Callable[[list[Any]], Awaitable[object]]:
    from summarization_pydantic_ai import SlidingWindowProcessor, SummarizationProcessor, count_tokens_approximately

    if subject == "summ":
        return SummarizationProcessor(model=None, trigger=("tokens", 10**12), keep=10)
    if subject == "slide":
        return SlidingWindowProcessor(trigger=("messages", size * 10), keep=10)

    async def count(messages: list[Any]) -> object:
        return count_tokens_approximately(messages)

    return count


for _subject, _label in (
    ("summ", "SummarizationProcessor"),
    ("slide", "SlidingWindowProcessor"),
    ("count", "count_tokens_approximately"),
):
    for _size in (1_000, 10_000, 50_000):

        @case(f"proc:{_subject}:{_size}", f"Processors, steady state: {_label} at {_size:,}")
        async def _steady(c: Case, name: str) -> None:
            _, subject, size = name.split(":")
            history, stream = _history(int(size))
            call = _processor(subject, int(size))
            await call(history)

            async def prepare() -> None:
                history.append(next(stream))
                history.append(next(stream))

            c.prepare, c.op = prepare, lambda: call(history)

        @case(f"cold:{_subject}:{_size}", f"Processors, cold first call: {_label} at {_size:,}", 3)
        async def _cold(c: Case, name: str) -> None:
            _, subject, size = name.split(":")
            holder: dict[str, Any] = {}

            async def prepare() -> None:
                holder.clear()
                gc.collect()
                holder["history"], _ = _history(int(size))
                holder["call"] = _processor(subject, int(size))

            c.prepare, c.op = prepare, lambda: holder["call"](holder["history"])


for _size in (1_000, 10_000, 50_000):

    @case(f"ref:cutoff:{_size}", f"Reference: find_safe_cutoff at {_size:,}")
    async def _cutoff(c: Case, name: str) -> None:
        from summarization_pydantic_ai import find_safe_cutoff

        history, _ = _history(int(name.split(":")[2]))

        async def op() -> object:
            return find_safe_cutoff(history, 10)

        c.op = op

    @case(f"ref:validate:{_size}", f"Reference: validate_history at {_size:,}")
    async def _validate(c: Case, name: str) -> None:
        from summarization_pydantic_ai import validate_history

        history, _ = _history(int(name.split(":")[2]))

        async def op() -> object:
            return validate_history(history)

        c.op = op


def _tmpdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="ab-compare-"))


def _prefilled(size: int) -> tuple[list[Any], Iterator[Any], Path]:
    from middleware import _prefilled as prefilled  # pyright: ignore[reportPrivateUsage]

    return prefilled(_tmpdir(), size)


def _middleware(path: Path) -> Any:
    from summarization_pydantic_ai import ContextManagerMiddleware

    return ContextManagerMiddleware(messages_path=path, summarization_model=None, max_tokens=10**12)


for _size in (1_000, 10_000, 50_000):

    @case(f"mw:{_size}", f"Middleware (a): one call after 2 new messages at {_size:,}")
    async def _mw(c: Case, name: str) -> None:
        history, stream, path = _prefilled(int(name.split(":")[1]))
        middleware = _middleware(path)
        await middleware(history)

        async def prepare() -> None:
            history.append(next(stream))
            history.append(next(stream))

        c.prepare, c.op = prepare, lambda: middleware(history)

    @case(f"mw-append:{_size}", f"Middleware (a): store append alone at {_size:,}")
    async def _mw_append(c: Case, name: str) -> None:
        from summarization_pydantic_ai import JsonHistoryStore, ensure_message_id

        _, stream, path = _prefilled(int(name.split(":")[1]))
        store = JsonHistoryStore.open(path)
        pair: list[Any] = []

        async def prepare() -> None:
            pair[:] = [next(stream), next(stream)]
            for message in pair:
                ensure_message_id(message)

        c.prepare, c.op = prepare, lambda: store.append(pair)

    @case(f"mw-first:{_size}", f"Middleware (a): first call on the full history at {_size:,}", 1)
    async def _mw_first(c: Case, name: str) -> None:
        history, _, path = _prefilled(int(name.split(":")[1]))
        holder: dict[str, Any] = {}

        async def prepare() -> None:
            old = holder.pop("middleware", None)
            if old is not None:
                for store in list(getattr(old, "_stores", {}).values()):
                    store.close()
            holder["middleware"] = _middleware(path)

        c.prepare, c.op = prepare, lambda: holder["middleware"](history)


@case("mw-session", "Middleware (b): a session of 1,000 calls, 2 new messages each (fsync off)", 1)
async def _mw_session(c: Case, name: str) -> None:
    state: dict[str, Any] = {}

    async def prepare() -> None:
        history, stream = _history(0)
        state["history"] = history
        state["incoming"] = [next(stream) for _ in range(2_000)]
        state["path"] = _tmpdir() / "session.json"

    async def op() -> None:
        middleware = _middleware(state["path"])
        history, incoming = state["history"], state["incoming"]
        for i in range(1_000):
            history += incoming[2 * i : 2 * i + 2]
            await middleware(history)

    c.prepare, c.op = prepare, op


async def _evicted(c: Case) -> tuple[Any, list[Any], Iterator[Any], Any]:
    from deep import eviction_history

    from pydantic_deep.backends import StateBackend
    from pydantic_deep.eviction import EvictionProcessor

    history, stream = eviction_history()
    backend = StateBackend()
    processor = EvictionProcessor(backend=backend)
    return processor, list(await processor(history)), stream, backend


def _run_state() -> Any:
    from deep import new_run_state

    return new_run_state()


@case("ev:later", "EvictionProcessor: later request of a run (`_process` with the run state)")
async def _ev_later(c: Case, name: str) -> None:
    processor, history, stream, _ = await _evicted(c)
    base = len(history)
    state: dict[str, Any] = {"n": 10}

    async def prepare() -> None:
        if state["n"] == 10:  # a new run of 10 requests on the 1,000 messages, as deep.py does
            del history[base:]
            state["run"] = _run_state()
            await processor._process(history, state["run"], None)  # pyright: ignore[reportPrivateUsage]
            state["n"] = 0
        state["n"] += 1
        history.extend([next(stream), next(stream)])

    c.prepare = prepare
    c.op = lambda: processor._process(history, state["run"], None)  # pyright: ignore[reportPrivateUsage]


@case("ev:first", "EvictionProcessor: first request of a run (fresh run state)")
async def _ev_first(c: Case, name: str) -> None:
    processor, history, _, _ = await _evicted(c)
    state: dict[str, Any] = {}

    async def prepare() -> None:
        state["run"] = _run_state()

    c.prepare = prepare
    c.op = lambda: processor._process(history, state["run"], None)  # pyright: ignore[reportPrivateUsage]


@case("ev:plain", "EvictionProcessor: plain form `await processor(messages)`")
async def _ev_plain(c: Case, name: str) -> None:
    processor, history, stream, _ = await _evicted(c)
    base = len(history)

    async def prepare() -> None:
        if len(history) - base >= 20:
            del history[base:]
        history.extend([next(stream), next(stream)])

    c.prepare, c.op = prepare, lambda: processor(history)


@case("ev:cold", "EvictionProcessor: first call on the loaded history (evicts 10 outputs of 100 KB)", 1)
async def _ev_cold(c: Case, name: str) -> None:
    from deep import eviction_history

    from pydantic_deep.backends import StateBackend
    from pydantic_deep.eviction import EvictionProcessor

    state: dict[str, Any] = {}

    async def prepare() -> None:
        state["history"], _ = eviction_history()
        state["processor"] = EvictionProcessor(backend=StateBackend())

    c.prepare, c.op = prepare, lambda: state["processor"](state["history"])


for _which in ("first", "later"):

    @case(f"ev:agent-{_which}", f"EvictionProcessor: `before_model_request` in `Agent.run`, {_which} request(s)", 5)
    async def _ev_agent(c: Case, name: str) -> None:
        import deep

        _, history, _, backend = await _evicted(c)
        later = name.endswith("later")
        timed = deep._TimedEviction  # pyright: ignore[reportPrivateUsage]

        class _CpuTimed(timed):  # the same hook, timed in process CPU time
            async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
                start = time.process_time_ns()
                result = await deep.EvictionProcessor.before_model_request(self, ctx, request_context)
                self.samples.append((self._request, (time.process_time_ns() - start) / 1e9, True))
                self._request += 1
                return result

        deep._TimedEviction = _CpuTimed  # pyright: ignore[reportPrivateUsage]

        async def op() -> float:
            samples = await deep._agent_runs(history, backend, 1)  # pyright: ignore[reportPrivateUsage]
            return statistics.median(s[1] for s in samples if s[0] > 0) if later else samples[0][1]

        c.op = op


async def _search() -> tuple[Any, Any, Iterator[Any], Path]:
    from deep import write_history

    from pydantic_deep.history_search import HistoryArchiveSearch

    path = _tmpdir() / "messages.json"
    _, stream = write_history(path, 10_000)
    search = HistoryArchiveSearch(messages_path=path)
    index = search.index_for(path)
    await search.update(index)
    return search, index, stream, path


@case("search:noop", "History search: update check, nothing appended")
async def _search_noop(c: Case, name: str) -> None:
    search, index, _, _ = await _search()
    await search.update(index)
    c.op = lambda: search.update(index)


@case("search:update", "History search: update after appending 2 messages (end to end)")
async def _search_update(c: Case, name: str) -> None:
    from summarization_pydantic_ai import JsonHistoryStore

    search, index, stream, path = await _search()
    store = JsonHistoryStore.open(path)

    async def prepare() -> None:
        store.append_sync([next(stream), next(stream)])

    c.prepare, c.op = prepare, lambda: search.update(index)


@case("search:read_pending", "History search: reading the 2 appended messages (`read_pending`; before: `read_new`)")
async def _search_read(c: Case, name: str) -> None:
    from summarization_pydantic_ai import JsonHistoryStore

    _, index, stream, path = await _search()
    store = JsonHistoryStore.open(path)
    new_api = hasattr(index, "read_pending")
    pending: list[Any] = []

    async def prepare() -> None:
        if pending:
            if new_api:
                index.apply(pending[0], {})
            else:
                records, end = pending[0]
                index.insert(records, {}, end)
        store.append_sync([next(stream), next(stream)])

    async def op() -> None:
        pending[:] = [index.read_pending() if new_api else index.read_new()]

    c.prepare, c.op = prepare, op


@case("search:query", "History search: `await search.search(query)`, all 50 queries once", 2)
async def _search_query(c: Case, name: str) -> None:
    from deep import QUERIES

    search, _, _, _ = await _search()
    for _, query in QUERIES:
        await search.search(query)

    async def op() -> None:
        for _, query in QUERIES:
            await search.search(query)

    c.op = op


@case("search:build", "History search: cold build of the index (10,000 messages)", 1)
async def _search_build(c: Case, name: str) -> None:
    from deep import _remove_index  # pyright: ignore[reportPrivateUsage]

    search, index, _, _ = await _search()

    async def prepare() -> None:
        _remove_index(index)
        gc.collect()

    c.prepare, c.op = prepare, lambda: search.update(index)


@case("compaction:summ", "One compaction of 10,000 messages: SummarizationProcessor, model=None", 1)
async def _compaction(c: Case, name: str) -> None:
    from summarization_pydantic_ai import SummarizationProcessor

    holder: dict[str, Any] = {}

    async def prepare() -> None:
        holder.clear()
        gc.collect()
        holder["history"], _ = _history(10_000)
        holder["processor"] = SummarizationProcessor(model=None, trigger=("messages", 100), keep=10)

    c.prepare, c.op = prepare, lambda: holder["processor"](holder["history"])


# -- Worker and driver ---------------------------------------------------------------------------------------------


_CLIENT_REQUESTS = """
#include <valgrind/callgrind.h>
void ab_instrument(void) { CALLGRIND_START_INSTRUMENTATION; }
void ab_toggle_collect(void) { CALLGRIND_TOGGLE_COLLECT; }
"""


def _client_requests() -> Any:
    """Callgrind's client requests (start the instrumentation, toggle the collection) as a tiny C library, built
    once with the system compiler (`gcc` and valgrind's headers)."""
    import ctypes
    import hashlib

    library = Path(tempfile.gettempdir()) / f"ab_callgrind_{hashlib.sha1(_CLIENT_REQUESTS.encode()).hexdigest()[:8]}.so"
    if not library.exists():
        source = library.with_suffix(".c")
        source.write_text(_CLIENT_REQUESTS)
        partial = library.with_suffix(f".{os.getpid()}.so")
        subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(partial), str(source)], check=True)
        partial.replace(library)
    return ctypes.CDLL(str(library))


async def _work(name: str, reps: int, *, callgrind: bool = False) -> dict[str, Any]:
    """Set the case up, then run it `reps` times. `callgrind`: the worker runs under callgrind with the
    instrumentation and collection off; both are switched on around each operation only (not its preparation)."""
    requests = _client_requests() if callgrind else None
    c = Case()
    await CASES[name][1](c, name)
    assert c.op is not None
    samples: list[float] = []
    gc.collect()
    gc.disable()
    if requests is not None:
        requests.ab_instrument()
    try:
        for _ in range(reps):
            if c.prepare is not None:
                await c.prepare()
            if requests is not None:
                requests.ab_toggle_collect()
            start = time.process_time_ns()
            result = await c.op()
            elapsed = (time.process_time_ns() - start) / 1e9
            if requests is not None:
                requests.ab_toggle_collect()
            samples.append(result if isinstance(result, float) else elapsed)
    finally:
        gc.enable()
    if c.cleanup is not None:
        await c.cleanup()
    return {"median": statistics.median(samples) if samples else 0.0, "n": len(samples)}


def _env(checkout: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), str(HERE)])
    env["PYTHONHASHSEED"] = "0"
    return env


def _run_worker(checkout: Path, name: str, reps: int) -> float:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--reps", str(reps)]
    done = subprocess.run(
        command, env=_env(checkout), capture_output=True, text=True, cwd=tempfile.gettempdir(), check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} on {checkout} failed:\n{done.stderr[-3000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["median"])


def _callgrind_worker(checkout: Path, name: str, reps: int) -> float:
    """Instructions per operation, counted by callgrind around the operations only (see `_work`)."""
    _client_requests()  # built here, not by two workers at once
    command = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--collect-atstart=no",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        name,
        "--reps",
        str(reps),
        "--callgrind",
    ]
    done = subprocess.run(
        command, env=_env(checkout), capture_output=True, text=True, cwd=tempfile.gettempdir(), check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} on {checkout} failed:\n{done.stderr[-3000:]}")
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from callgrind:\n{done.stderr[-2000:]}")
    return float(found.group(1)) / reps


def _format(value: float, callgrind: bool) -> str:
    if callgrind:
        return f"{value / 1e6:,.3f} M instr"
    from _common import fmt_time

    return fmt_time(value)


def compare(
    a: Path, b: Path, names: list[str], *, rounds: int, reps: int | None, callgrind: bool
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for name in names:
        per_side: dict[str, list[float]] = {"A": [], "B": []}
        for r in range(rounds):
            order = (("A", a), ("B", b)) if r % 2 == 0 else (("B", b), ("A", a))
            for side, checkout in order:
                n = REPS.get(name, 1) if reps is None else reps
                if callgrind:
                    per_side[side].append(_callgrind_worker(checkout, name, n))
                else:
                    per_side[side].append(_run_worker(checkout, name, n))
        before, after = statistics.median(per_side["A"]), statistics.median(per_side["B"])
        row = {
            "case": name,
            "row": CASES[name][0],
            "before": before,
            "after": after,
            "ratio": after / before if before else float("nan"),
            "method": "callgrind" if callgrind else "cpu",
            "rounds": per_side,
        }
        results.append(row)
        print(
            f"{name:24} A {_format(before, callgrind):>18}  B {_format(after, callgrind):>18}  "
            f"B/A {row['ratio']:5.2f}  (A {min(per_side['A']) / before:.2f}-{max(per_side['A']) / before:.2f}, "
            f"B {min(per_side['B']) / after:.2f}-{max(per_side['B']) / after:.2f})",
            flush=True,
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*", help="case names (default: all; --list shows them); a prefix selects many")
    parser.add_argument("--a", type=Path, help="the 'before' checkout")
    parser.add_argument("--b", type=Path, default=ROOT, help="the 'after' checkout (default: this one)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--reps", type=int, help="repetitions per worker (default: 50, fewer for long cases)")
    parser.add_argument("--callgrind", action="store_true", help="instruction counts instead of CPU time")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)

    args = parser.parse_args()
    if args.worker:
        print(
            json.dumps(
                asyncio.run(_work(args.worker, args.reps if args.reps is not None else 50, callgrind=args.callgrind))
            )
        )
        return
    if args.list:
        for name, (row, _) in CASES.items():
            print(f"{name:24} {row}")
        return
    if args.a is None:
        parser.error("--a (the 'before' checkout) is required")
    names = [n for n in CASES if not args.cases or any(n == c or n.startswith(c) for c in args.cases)]
    reps = args.reps
    for name in names:
        REPS.setdefault(name, 50)
    results = compare(args.a, args.b, names, rounds=args.rounds, reps=reps, callgrind=args.callgrind)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
