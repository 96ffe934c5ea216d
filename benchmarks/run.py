"""Steady-state cost of one history-processor call on long histories.

Run from the repository root:

    python benchmarks/run.py          # 1,000 / 10,000 / 50,000 messages, 200 timed calls each
    python benchmarks/run.py --quick  # same sizes, 30 timed calls each

The results are printed and written to `docs/benchmarks.md` (overwritten; `--output PATH` to change,
`--no-write` to skip). `--check` exits with status 1 when a target is missed.

What is measured (issue 2, acceptance "Benchmark"): one plain call `await processor(messages)` on a history
below the trigger, after the history grew by 2 messages (a response and a request) since the previous call.
Target: under 1 ms at 10,000 messages, and a cost that does not grow with the history (50k / 1k median
ratio under 2).

The page also gets a section for `ContextManagerMiddleware` with persistence (issue 3), measured by
`benchmarks/middleware.py` (see there; `python benchmarks/middleware.py` prints it alone, without writing), and
sections for `EvictionProcessor` (issue 4) and the history search (issue 5), measured by `benchmarks/deep.py`
(`python benchmarks/deep.py` prints them alone), checkpoints (issue 11), by `benchmarks/checkpoints.py`, and the
medium strategy preset's per-request overhead (issue 13), by `benchmarks/presets.py`, the content compressors and
`MessageCompressor` (issue 13), by `benchmarks/compressors.py`, importance pruning and phase checkpoints
(issue 13), by `benchmarks/pruning.py`, `CostTrackingMiddleware` (issue 12), by `benchmarks/cost.py`, and
the file and SQLite history stores (issue 14), by `benchmarks/stores.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from _common import (
    BATCH,
    PAIRS_PER_PROMPT,
    RETURN_CHARS,
    SIZES,
    TARGET_MEDIAN_S,
    TARGET_RATIO,
    TARGET_SIZE,
    Timing,
    build_history,
    fmt_time,
    kept_sections,
    with_sections,
)
from pydantic_ai.messages import (
    ModelMessage,
)

from summarization_pydantic_ai import (
    SlidingWindowProcessor,
    SummarizationProcessor,
    count_tokens_approximately,
    find_safe_cutoff,
    validate_history,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "docs" / "benchmarks.md"
BEFORE_AFTER = ROOT / "benchmarks" / "before_after_issue9.md"
"""The issue-9 before/after section: measured on two checkouts by `benchmarks/ab_compare.py` (not by this script),
kept as written and copied into the page."""

Call = Callable[[list[ModelMessage]], Awaitable[object]]


def _sync(fn: Callable[[list[ModelMessage]], object]) -> Call:
    async def call(messages: list[ModelMessage]) -> object:
        return fn(messages)

    return call


def subjects(size: int) -> dict[str, Call]:
    """Fresh processors for one history size (the triggers are far above what the history reaches)."""
    summarization = SummarizationProcessor(model=None, trigger=("tokens", 10**12), keep=10)
    sliding = SlidingWindowProcessor(trigger=("messages", size * 10), keep=10)
    return {
        "SummarizationProcessor": summarization,
        "SlidingWindowProcessor": sliding,
        "count_tokens_approximately": _sync(count_tokens_approximately),
    }


@dataclass
class Row:
    subject: str
    size: int
    cold_s: float
    steady: Timing
    """Calls on the grown history itself (the target is checked on these)."""
    after_copy: Timing
    """Calls on a copy of the grown history made just before (not timed), as pydantic-ai passes it."""


async def _timed_batch(
    call: Call,
    history: list[ModelMessage],
    stream: Iterator[ModelMessage],
    iterations: int,
    samples: list[float],
    *,
    copy: bool,
) -> None:
    """`iterations` timed calls, after one untimed call that settles the caches after the previous batch."""
    for i in range(iterations + 1):
        history.append(next(stream))
        history.append(next(stream))
        batch = list(history) if copy else history
        start = time.perf_counter()
        await call(batch)
        elapsed = time.perf_counter() - start
        if i:
            samples.append(elapsed)


async def measure_subject(name: str, iterations: int) -> list[Row]:
    """One subject at every size: the cold first call, then `iterations` timed calls of each kind, each after
    the history grew by one response and one request. Calls on the history itself and calls on a fresh copy of
    it (made untimed before each call, as pydantic-ai does before every request) alternate in batches of
    `BATCH`, and the sizes take turns, so a burst of load on a shared machine hits every size alike.
    Only the awaited call is timed; the garbage collector is paused meanwhile, as `timeit` does."""
    histories = {size: build_history(size) for size in SIZES}
    calls = {size: subjects(size)[name] for size in SIZES}
    cold: dict[int, float] = {}
    steady: dict[int, list[float]] = {size: [] for size in SIZES}
    after_copy: dict[int, list[float]] = {size: [] for size in SIZES}
    gc.collect()
    gc.disable()
    try:
        for size, (history, _) in histories.items():
            start = time.perf_counter()
            await calls[size](history)
            cold[size] = time.perf_counter() - start
        done = 0
        while done < iterations:
            batch = min(BATCH, iterations - done)
            for size, (history, stream) in histories.items():
                await _timed_batch(calls[size], history, stream, batch, steady[size], copy=False)
                await _timed_batch(calls[size], history, stream, batch, after_copy[size], copy=True)
            done += batch
    finally:
        gc.enable()
    del histories
    gc.collect()
    return [Row(name, size, cold[size], Timing(steady[size]), Timing(after_copy[size])) for size in SIZES]


def measure_reference(size: int, repeats: int) -> dict[str, Timing]:
    """O(n) work that runs only when a compaction happens: the pair-safe cutoff and the history validation."""
    history, _ = build_history(size)
    results: dict[str, list[float]] = {"find_safe_cutoff": [], "validate_history": []}
    functions: dict[str, Callable[[Sequence[ModelMessage]], object]] = {
        "find_safe_cutoff": lambda m: find_safe_cutoff(m, 10),
        "validate_history": validate_history,
    }
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            for name, fn in functions.items():
                start = time.perf_counter()
                fn(history)
                results[name].append(time.perf_counter() - start)
    finally:
        gc.enable()
    del history
    gc.collect()
    return {name: Timing(samples) for name, samples in results.items()}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cores() -> str:
    logical = os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = logical
    return f"{usable} usable / {logical} logical"


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


_LOAD_AT_START = _load_average()


def _load() -> str:
    """The 1-minute load average at the start and at the end, against the cores: a shared machine slows every
    figure (a worker-thread hop waits for a core), so compare runs made under similar load."""
    start, end = _LOAD_AT_START, _load_average()
    if start is None or end is None:
        return "unknown"
    cores = os.cpu_count() or 1
    shared = max(start, end) > 0.5 * cores
    note = " (other work shared the machine: figures are slower than on an idle one)" if shared else ""
    return f"{start:.2f} at the start, {end:.2f} at the end, on {cores} logical cores{note}"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


@dataclass
class Verdict:
    subject: str
    median_10k: float
    ratio: float
    median_10k_after_copy: float
    ratio_after_copy: float

    @property
    def time_ok(self) -> bool:
        return self.median_10k < TARGET_MEDIAN_S

    @property
    def ratio_ok(self) -> bool:
        return self.ratio < TARGET_RATIO

    @property
    def ok(self) -> bool:
        return self.time_ok and self.ratio_ok


def verdicts(rows: list[Row]) -> list[Verdict]:
    by_key = {(r.subject, r.size): r for r in rows}
    result: list[Verdict] = []
    for subject in dict.fromkeys(r.subject for r in rows):
        small, target, large = (by_key[(subject, size)] for size in (min(SIZES), TARGET_SIZE, max(SIZES)))
        result.append(
            Verdict(
                subject,
                target.steady.median,
                large.steady.median / small.steady.median,
                target.after_copy.median,
                large.after_copy.median / small.after_copy.median,
            )
        )
    return result


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _target_lines(rows: list[Row]) -> list[str]:
    checks = verdicts(rows)
    big, small = f"{max(SIZES) // 1000}k", f"{min(SIZES) // 1000}k"
    lines = [
        "## Targets",
        "",
        f"- One call on a history of {TARGET_SIZE:,} messages that grew by 2 messages since the previous call "
        f"takes less than {fmt_time(TARGET_MEDIAN_S)} (median).",
        f"- The cost does not grow with the history: the median at {max(SIZES):,} messages over the median at "
        f"{min(SIZES):,} messages is below {TARGET_RATIO:g}.",
        "",
        f"**Result: {'all targets met' if all(v.ok for v in checks) else 'targets NOT met'}.**",
        "",
        f"| Subject | Median at {TARGET_SIZE:,} | < {fmt_time(TARGET_MEDIAN_S)} | Ratio {big} / {small} "
        f"| < {TARGET_RATIO:g} | After a copy: median at {TARGET_SIZE:,} | After a copy: ratio {big} / {small} |",
        "|---|---:|:-:|---:|:-:|---:|---:|",
    ]
    lines += [
        f"| `{v.subject}` | {fmt_time(v.median_10k)} | {_yes(v.time_ok)} | {v.ratio:.2f} | {_yes(v.ratio_ok)} "
        f"| {fmt_time(v.median_10k_after_copy)} | {v.ratio_after_copy:.2f} |"
        for v in checks
    ]
    lines += [
        "",
        "The targets are checked on calls on the grown history itself. The last two columns time the same call "
        "when the caller copied the history just before it, as pydantic-ai does before every request: the call "
        "does the same work, but the caller's copy (O(n); not timed, not part of the processor) has just pushed "
        "the processor's data out of the CPU caches, so on long histories the call waits on memory longer.",
        "",
        "## Why a call below the trigger does not grow with the history",
        "",
        "- Each counter keeps a `HistoryCursor` per history (up to 32) with every message's count and the "
        "total. The cursor compares the identities of the whole previous history with the new one in one "
        "`memcmp` of the two lists' item arrays (in place, nothing copied: about 20 µs at 50,000 messages), "
        "so a history that grew at the end is counted from that total plus the new messages, and a message "
        "edited anywhere is re-measured (its old count out, the new one in). The last 8 messages are also "
        "checked for in-place mutation of the same object on every call; near a token trigger the processors "
        "check every message (`verify=True`) before acting.",
        "- The first count of a history measures every message once with the default estimate's fast form "
        "(the length of each part's text; JSON arguments measured without serializing them; same counts).",
        "- The processors do not copy the history they are given (they never modify it, and return the same "
        "list when nothing changes).",
        "- Pair-safe cutoffs and history validation are O(n), but run only when a compaction happens (below).",
        "",
    ]
    return lines


def _middleware_module() -> Any:
    """`benchmarks/middleware.py` (imported on first use; it shares `_common.py` with this script)."""
    import middleware

    return middleware


def _deep_module() -> Any:
    """`benchmarks/deep.py` (EvictionProcessor and history search)."""
    import deep

    return deep


def _compaction_module() -> Any:
    """`benchmarks/compaction.py` (one compaction of 10,000 messages)."""
    import compaction

    return compaction


def _cost_module() -> Any:
    """`benchmarks/cost.py` (CostTrackingMiddleware per request)."""
    import cost

    return cost


def _presets_module() -> Any:
    """`benchmarks/presets.py` (the medium strategy preset's per-request overhead)."""
    import presets

    return presets


def _pruning_module() -> Any:
    """`benchmarks/pruning.py` (ImportancePruner and PhaseCheckpoints)."""
    import pruning

    return pruning


def _checkpoints_module() -> Any:
    """`benchmarks/checkpoints.py` (checkpoint save and prune)."""
    import checkpoints

    return checkpoints


def _stores_module() -> Any:
    """`benchmarks/stores.py` (append, load and search in the file and SQLite stores)."""
    import stores

    return stores


def _compressors_module() -> Any:
    """`benchmarks/compressors.py` (1 MB snapshot compression, MessageCompressor per-request cost)."""
    import compressors

    return compressors


def render_markdown(
    rows: list[Row],
    references: dict[int, dict[str, Timing]],
    middleware: tuple[list[Any], list[Any]],
    deep: tuple[Any, Any],
    args: argparse.Namespace,
    elapsed: float,
    checkpoints: Any = None,
    compaction: list[str] | None = None,
    presets: list[str] | None = None,
    compressors: Any = None,
    pruning: list[str] | None = None,
    cost: list[str] | None = None,
    stores: list[str] | None = None,
) -> str:
    mode = "quick (`--quick`)" if args.quick else "full"
    lines = [
        "# Benchmarks",
        "",
        "The cost of one history-processor call on a long history, of `ContextManagerMiddleware` with "
        "persistence, of `EvictionProcessor` per request, and of the history search (index build, queries, "
        "updates), measured by `benchmarks/run.py` (and `benchmarks/middleware.py`, `benchmarks/deep.py`).",
        "This page is generated: run `python benchmarks/run.py` from the repository root to refresh it.",
        "",
        *_target_lines(rows),
        "## Steady state: one call after the history grew by 2 messages",
        "",
        "| Subject | History | Median | p90 | After a copy: median | After a copy: p90 | Cold first call |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| `{r.subject}` | {r.size:,} | {fmt_time(r.steady.median)} | {fmt_time(r.steady.p90)} | "
        f"{fmt_time(r.after_copy.median)} | {fmt_time(r.after_copy.p90)} | {fmt_time(r.cold_s)} |"
        for r in rows
    ]
    lines += [
        "",
        "The cold first call counts every message once (the per-message cache is empty); later calls count "
        "only the 2 new messages.",
        "",
        "## Reference: O(n) work done only when a compaction happens",
        "",
        "`find_safe_cutoff(messages, 10)` builds the tool-pair index over the whole history, and",
        "`validate_history(messages)` checks every message. Neither runs on a call below the trigger.",
        "",
        "| Function | History | Median | p90 |",
        "|---|---:|---:|---:|",
    ]
    for size, timings in references.items():
        lines += [f"| `{name}` | {size:,} | {fmt_time(t.median)} | {fmt_time(t.p90)} |" for name, t in timings.items()]
    lines += [
        "",
        "## Method",
        "",
        f"- Histories of {', '.join(f'{s:,}' for s in SIZES)} messages (plus one, so that they end with a "
        "request): a first request with a system prompt and a user prompt, then (response, request) pairs. Most "
        f"pairs are a text part plus a `ToolCallPart` with dict args, answered by a `ToolReturnPart` of "
        f"{RETURN_CHARS:,} characters of source-like text; every {PAIRS_PER_PROMPT}th pair is a text answer and "
        f"a new user prompt (a user prompt every ~{2 * PAIRS_PER_PROMPT} messages).",
        "- Subjects: `SummarizationProcessor(model=None, trigger=('tokens', 10**12), keep=10)`, "
        "`SlidingWindowProcessor(trigger=('messages', size * 10), keep=10)` (both far below their trigger, so "
        "they return the history unchanged) and the bare `count_tokens_approximately`.",
        "- For every subject, a fresh history of every size is built and a fresh processor created for each; the "
        "first call on each is the cold call. Then, "
        f"{args.iterations} times per size and kind: the history grows by one `ModelResponse` and one "
        "`ModelRequest`, then one awaited call `await processor(messages)` is timed with `time.perf_counter` "
        "inside one running event loop. Calls on the history itself and calls on a copy made just before the "
        f"call (untimed, as pydantic-ai does) alternate in batches of {BATCH} (each after one untimed call), "
        "and the sizes take turns, so that load from other processes hits every size alike.",
        "- The garbage collector is paused while timing (as `timeit` does). Median and p90 (nearest rank) of the "
        "timed calls are reported; the ratio is the median at the largest size over the median at the smallest.",
        f"- The reference functions are timed {args.reference_repeats} times each per size on a fresh history.",
        "- The machine may be shared with other work, so single calls can be slow outliers: compare medians.",
        "",
        *_middleware_module().markdown_lines(*middleware, args.iterations),
        *_deep_module().markdown_lines(*deep, args.iterations),
        *(_checkpoints_module().markdown_lines(checkpoints) if checkpoints is not None else []),
        *(compaction or []),
        *(cost or []),
        *(presets or []),
        *(_compressors_module().markdown_lines(compressors) if compressors is not None else []),
        *(pruning or []),
        *([*BEFORE_AFTER.read_text(encoding="utf-8").splitlines(), ""] if BEFORE_AFTER.exists() else []),
        *(stores or []),
        "## Environment",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- CPU: {_cpu_model()} ({_cores()} cores)",
        f"- Python: {platform.python_implementation()} {platform.python_version()} ({sys.platform})",
        f"- Load average (1 min): {_load()}",
        f"- pydantic-ai-slim: {_version('pydantic-ai-slim')}; "
        f"summarization-pydantic-ai: {_version('summarization-pydantic-ai')}; SQLite: {sqlite3.sqlite_version}",
        f"- Mode: {mode}; {args.iterations} timed calls per size, subject and kind (middleware: per size; "
        f"EvictionProcessor: later requests in all); total run time {elapsed:,.0f} s.",
        "",
    ]
    return "\n".join(lines)


def print_results(rows: list[Row], references: dict[int, dict[str, Timing]]) -> None:
    print(f"{'subject':<28} {'history':>8} {'median':>10} {'p90':>10} {'copy med':>10} {'copy p90':>10} {'cold':>10}")
    for r in rows:
        print(
            f"{r.subject:<28} {r.size:>8,} {fmt_time(r.steady.median):>10} {fmt_time(r.steady.p90):>10} "
            f"{fmt_time(r.after_copy.median):>10} {fmt_time(r.after_copy.p90):>10} {fmt_time(r.cold_s):>10}"
        )
    for size, timings in references.items():
        for name, t in timings.items():
            print(f"{name:<28} {size:>8,} {fmt_time(t.median):>10} {fmt_time(t.p90):>10}")
    for v in verdicts(rows):
        print(
            f"{v.subject}: median@{TARGET_SIZE:,} {fmt_time(v.median_10k)} ({'ok' if v.time_ok else 'MISSED'}), "
            f"ratio {v.ratio:.2f} ({'ok' if v.ratio_ok else 'MISSED'}); after a copy: "
            f"median@{TARGET_SIZE:,} {fmt_time(v.median_10k_after_copy)}, ratio {v.ratio_after_copy:.2f}"
        )


async def run(
    args: argparse.Namespace,
) -> tuple[list[Row], dict[int, dict[str, Timing]], tuple[list[Any], list[Any]], tuple[Any, Any]]:
    rows: list[Row] = []
    references: dict[int, dict[str, Timing]] = {}
    for name in subjects(min(SIZES)):
        measured = await measure_subject(name, args.iterations)
        rows += measured
        medians = ", ".join(f"{r.size:,}: {fmt_time(r.steady.median)}" for r in measured)
        print(f"  {name}: {medians}", file=sys.stderr, flush=True)
    rows.sort(key=lambda r: r.size)  # stable: subjects keep their order within a size
    for size in SIZES:
        references[size] = measure_reference(size, args.reference_repeats)
    middleware = await _middleware_module().run_middleware(args.iterations, quick=args.quick)
    deep = await _deep_module().run_deep(args.iterations, quick=args.quick)
    return rows, references, middleware, deep


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer timed calls (30 instead of 200)")
    parser.add_argument("--iterations", type=int, default=None, help="timed calls per size and subject")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="markdown file to write")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write the markdown file")
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a target is missed")
    args = parser.parse_args(argv)
    if args.iterations is None:
        args.iterations = 30 if args.quick else 200
    if args.iterations < 1:
        parser.error("--iterations must be >= 1")
    args.reference_repeats = 3 if args.quick else 15
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    rows, references, middleware, deep = asyncio.run(run(args))
    checkpoints = asyncio.run(_checkpoints_module().run_checkpoints(args.iterations))
    compaction_results, expected_calls = asyncio.run(_compaction_module().run(10_000, 3))
    compaction = _compaction_module().markdown_lines(compaction_results, expected_calls, 10_000, 3)
    cost = _cost_module().markdown_lines(asyncio.run(_cost_module().run(_cost_module().SIZES, 3)), 3)
    presets_result = asyncio.run(_presets_module().run(3 if args.quick else 10))
    presets = _presets_module().markdown_lines(presets_result)
    compressors = asyncio.run(_compressors_module().run(args.iterations))
    pruning_result = asyncio.run(_pruning_module().run_pruning(args.iterations))
    pruning = _pruning_module().markdown_lines(pruning_result)
    stores = _stores_module().markdown_lines(asyncio.run(_stores_module().run_stores(args.quick)))
    elapsed = time.perf_counter() - started
    print_results(rows, references)
    _middleware_module().print_middleware(*middleware)
    _deep_module().print_deep(*deep)
    _checkpoints_module().print_checkpoints(checkpoints)
    print("\n".join(compaction))
    print("\n".join(cost))
    print("\n".join(presets))
    print("\n".join(stores))
    _compressors_module().print_compressors(compressors)
    _pruning_module().print_pruning(pruning_result)
    if not args.no_write:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        page = render_markdown(
            rows,
            references,
            middleware,
            deep,
            args,
            elapsed,
            checkpoints,
            compaction,
            presets,
            compressors,
            pruning,
            cost,
            stores,
        )
        # Sections measured by other scripts (the PostgreSQL benchmarks need a server) are kept as they are.
        args.output.write_text(with_sections(page, kept_sections(args.output)), encoding="utf-8")
        print(f"wrote {args.output}")
    ok = (
        all(v.ok for v in verdicts(rows))
        and _middleware_module().all_ok(*middleware)
        and _deep_module().all_ok(*deep)
        and checkpoints.ok
        and presets_result.ok
        and compressors.ok
        and pruning_result.ok
    )
    if args.check and not ok:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
