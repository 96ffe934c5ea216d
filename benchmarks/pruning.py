"""Importance pruning and phase checkpoints (issue 13); run by `benchmarks/run.py`, or alone:
`python benchmarks/pruning.py [iterations]` (prints, does not write).

Measured, on the benchmark histories of `_common.py` (tool calls answered by ~2 KB returns, a user prompt every 20
messages):

- `ImportancePruner` below its trigger: one plain call after the history grew by a response and a request (what
  every model request costs while nothing needs pruning). Target: under 2 ms (median) at 1,000 messages, and about
  the same at 10,000 (the count is incremental).
- One prune: a fresh history (nothing cached) pruned to half its tokens: scoring every unit, dropping, validating.
  Reported with the reduction.
- One phase checkpoint: `PhaseCheckpoints` archiving a phase of N messages in a `JsonHistoryStore` that already
  holds them (as the middleware records them before every request), writing the checkpoint record.
"""

from __future__ import annotations

import asyncio
import gc
import os
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from _common import Timing, build_history, fmt_time
from pydantic_ai.messages import ModelMessage

from summarization_pydantic_ai import (
    ContextEvent,
    ContextReduced,
    ImportancePruner,
    JsonHistoryStore,
    PhaseCheckpoints,
    count_tokens_approximately,
    ensure_message_id,
    validate_history,
)

STEADY_SIZES = (1_000, 10_000)
PRUNE_SIZES = (1_000, 10_000)
CHECKPOINT_SIZES = (1_000, 10_000)
TARGET_SIZE = 1_000
TARGET_S = 2e-3
PRUNE_REPEATS = 5


@dataclass
class PruneCase:
    size: int
    timing: Timing
    tokens_before: int
    tokens_after: int
    messages_after: int


@dataclass
class PruningResults:
    steady: dict[int, Timing]
    prunes: list[PruneCase]
    checkpoints: dict[int, Timing]
    iterations: int
    load: str = field(default_factory=lambda: f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    """The machine's load when the run ended: on a shared machine every figure is slower than on an idle one."""
    date: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))

    @property
    def ok(self) -> bool:
        return self.steady[TARGET_SIZE].median < TARGET_S


async def _steady(size: int, iterations: int) -> Timing:
    history, stream = build_history(size)
    pruner = ImportancePruner(target_tokens=10**12)
    await pruner(history)  # the cold call: every message counted once
    samples: list[float] = []
    gc.disable()
    try:
        for _ in range(iterations):
            history += [next(stream), next(stream)]
            started = time.perf_counter()
            result = await pruner(history)
            samples.append(time.perf_counter() - started)
            assert result is history
    finally:
        gc.enable()
    return Timing(samples)


async def _prune(size: int) -> PruneCase:
    samples: list[float] = []
    events: list[ContextEvent] = []
    result: list[ModelMessage] = []
    for _ in range(PRUNE_REPEATS):
        history, _ = build_history(size)  # fresh objects: no cached counts
        target = count_tokens_approximately(history) // 2
        pruner = ImportancePruner(target_tokens=target, event_callback=events.append)
        gc.collect()
        started = time.perf_counter()
        result = await pruner(history)
        samples.append(time.perf_counter() - started)
        assert validate_history(result) == []
    event = events[-1]
    assert isinstance(event, ContextReduced)
    return PruneCase(size, Timing(samples), event.tokens_before, event.tokens_after, len(result))


async def _checkpoint(root: Path, size: int) -> Timing:
    samples: list[float] = []
    for repeat in range(PRUNE_REPEATS):
        history, stream = build_history(size)
        history += [next(stream), next(stream)]  # ends with a new prompt or pending results
        for message in history:
            ensure_message_id(message)
        store = JsonHistoryStore(root / f"s{size}-{repeat}" / "messages.json")
        store.append_sync(history)  # what the middleware recorded before this request
        phases = PhaseCheckpoints(history_store=store)
        phases.mark_done("phase", state={"done": True}, objectives=["read the modules"])
        gc.collect()
        started = time.perf_counter()
        result = await phases(history)
        samples.append(time.perf_counter() - started)
        assert len(result) < len(history) and phases.completed
        store.close()
    return Timing(samples)


async def run_pruning(iterations: int) -> PruningResults:
    steady = {size: await _steady(size, iterations) for size in STEADY_SIZES}
    prunes = [await _prune(size) for size in PRUNE_SIZES]
    with tempfile.TemporaryDirectory(prefix="bench-phases-") as root:
        checkpoints = {size: await _checkpoint(Path(root), size) for size in CHECKPOINT_SIZES}
    return PruningResults(steady, prunes, checkpoints, iterations)


def markdown_lines(r: PruningResults) -> list[str]:
    target = r.steady[TARGET_SIZE]
    lines = [
        "## Importance pruning and phase checkpoints (issue 13)",
        "",
        "`ImportancePruner` below its trigger: one plain call after the history grew by a response and a request "
        "(the cost of every model request while nothing needs pruning; the token count is incremental). "
        f"Target: under {fmt_time(TARGET_S)} (median) at {TARGET_SIZE:,} messages: {fmt_time(target.median)} "
        f"({'met' if r.ok else '**missed**'}).",
        "",
        "| History | median | p90 |",
        "|---:|---:|---:|",
        *(f"| {size:,} | {fmt_time(t.median)} | {fmt_time(t.p90)} |" for size, t in r.steady.items()),
        "",
        "One prune of a fresh history (nothing cached) to half its tokens: every unit scored (errors, state "
        "changes, instructions, recency, references), the lowest dropped, the result validated. Reported, not a "
        "target: it runs only when the trigger is crossed.",
        "",
        "| History | median | p90 | tokens before | tokens after | messages after |",
        "|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {c.size:,} | {fmt_time(c.timing.median)} | {fmt_time(c.timing.p90)} | {c.tokens_before:,} | "
            f"{c.tokens_after:,} | {c.messages_after:,} |"
            for c in r.prunes
        ),
        "",
        "One phase checkpoint archiving a phase of N messages: the messages are already in the `JsonHistoryStore` "
        "(the middleware records them before every request), the checkpoint record is appended and the history "
        "rebuilt as the instructions plus the checkpoint.",
        "",
        "| Phase | median | p90 |",
        "|---:|---:|---:|",
        *(f"| {size:,} messages | {fmt_time(t.median)} | {fmt_time(t.p90)} |" for size, t in r.checkpoints.items()),
        "",
        f"{r.iterations} timed calls per size below the trigger; {PRUNE_REPEATS} prunes and checkpoints per size. "
        f"Measured {r.date}; load average (1 min) at the end: {r.load} (a shared machine: compare medians).",
        "",
    ]
    return lines


def print_pruning(r: PruningResults) -> None:
    for size, t in r.steady.items():
        print(f"pruner below trigger @ {size:>6,}: median {fmt_time(t.median)} p90 {fmt_time(t.p90)}")
    for c in r.prunes:
        print(
            f"one prune @ {c.size:>6,}: median {fmt_time(c.timing.median)}; tokens {c.tokens_before:,} -> "
            f"{c.tokens_after:,}; {c.messages_after:,} messages kept"
        )
    for size, t in r.checkpoints.items():
        print(f"phase checkpoint of {size:>6,} messages: median {fmt_time(t.median)} p90 {fmt_time(t.p90)}")
    print(f"pruning: {'ok' if r.ok else 'MISSED'}")


if __name__ == "__main__":
    import sys

    results = asyncio.run(run_pruning(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
    print_pruning(results)
    sys.exit(0 if results.ok else 1)
