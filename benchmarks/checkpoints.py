"""Checkpoints (issue 11) benchmark; run by `benchmarks/run.py`, or alone: `python benchmarks/checkpoints.py`.

Sessions of 100 and 10,000 messages (written with `JsonHistoryStore`, as `ContextManagerMiddleware` writes them),
each with a `checkpoints.json` already holding `keep` (50) automatic checkpoints. Timed, per iteration, as the
middleware does after a turn: `FileCheckpointStore.save` of a new automatic checkpoint (a pointer to the last
message: the file rewritten atomically), then `FileCheckpointStore.prune(50)` (drops the oldest one: one more
atomic write); and, apart, the public `await CheckpointMiddleware.checkpoint(messages)` (builds the checkpoint and
saves it through a worker thread). Target: save and prune under 5 ms (median) at 10,000 messages with the
default settings, and the same cost at 100 messages (pointers, not copies). With `fsync=True` the figures are
reported, not a target: they are the disk's flush time. `rewind` (reads the history up to the checkpoint) is
reported too.
"""

from __future__ import annotations

import asyncio
import gc
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from _common import Timing, build_history, fmt_time
from pydantic_ai.messages import ModelMessage

from pydantic_deep import Checkpoint, CheckpointMiddleware, FileCheckpointStore
from summarization_pydantic_ai import JsonHistoryStore, ensure_message_id, get_message_id

CASES = ((100, False), (10_000, False), (10_000, True))
"""(history size, fsync)."""
TARGET_SIZE = 10_000
KEEP = 50
TARGET_S = 5e-3
REWINDS = 3


@dataclass
class CaseResult:
    size: int
    fsync: bool
    save: Timing
    prune: Timing
    api: Timing
    rewind: Timing
    file_bytes: int


@dataclass
class CheckpointResults:
    cases: list[CaseResult]
    iterations: int
    load: str = field(default_factory=lambda: f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    """The machine's load when the run ended: the p90s and the worker-thread hop of `checkpoint()` follow it."""

    @property
    def target(self) -> CaseResult:
        return next(r for r in self.cases if r.size == TARGET_SIZE and not r.fsync)

    @property
    def ok(self) -> bool:
        return self.target.save.median < TARGET_S and self.target.prune.median < TARGET_S


def _session(root: Path, size: int, fsync: bool) -> tuple[Path, list[ModelMessage]]:
    """A session directory whose messages.json holds `size` messages (+1: it ends with a request)."""
    messages, _ = build_history(size)
    for message in messages:
        ensure_message_id(message)
    session_dir = root / f"s{size}-{fsync}"
    store = JsonHistoryStore(session_dir / "messages.json")
    store.append_sync(messages)
    store.close()
    return session_dir, messages


def _automatic(messages: list[ModelMessage]) -> Checkpoint:
    return Checkpoint(
        uuid.uuid4().hex[:12], "bench", None, get_message_id(messages[-1]), len(messages), datetime.now(UTC), True
    )


async def _measure(root: Path, size: int, fsync: bool, iterations: int) -> CaseResult:
    session_dir, messages = _session(root, size, fsync)
    store = FileCheckpointStore(session_dir, fsync=fsync)
    middleware = CheckpointMiddleware(store=store, keep=KEEP)
    for i in range(KEEP):  # a file already full of automatic checkpoints, as after a long session
        store.save(_automatic(messages[: 2 * i + 1]))
    saves: list[float] = []
    prunes: list[float] = []
    api: list[float] = []
    gc.disable()
    try:
        for _ in range(iterations):
            checkpoint = _automatic(messages)
            started = time.perf_counter()
            store.save(checkpoint)
            saves.append(time.perf_counter() - started)
            started = time.perf_counter()
            pruned = store.prune(KEEP)
            prunes.append(time.perf_counter() - started)
            assert pruned == 1
            started = time.perf_counter()
            named = await middleware.checkpoint(messages, name="bench")
            api.append(time.perf_counter() - started)
            store.delete(named.id)  # untimed: the file stays at KEEP checkpoints
    finally:
        gc.enable()
    rewinds: list[float] = []
    for _ in range(REWINDS):
        started = time.perf_counter()
        history = await middleware.rewind(checkpoint.id)
        rewinds.append(time.perf_counter() - started)
        assert len(history) == len(messages)
    return CaseResult(
        size, fsync, Timing(saves), Timing(prunes), Timing(api), Timing(rewinds), store.path.stat().st_size
    )


async def run_checkpoints(iterations: int) -> CheckpointResults:
    with tempfile.TemporaryDirectory(prefix="bench-checkpoints-") as root:
        cases = [await _measure(Path(root), size, fsync, iterations) for size, fsync in CASES]
    return CheckpointResults(cases, iterations)


def markdown_lines(r: CheckpointResults) -> list[str]:
    t = r.target
    lines = [
        "## Checkpoints",
        "",
        f"`FileCheckpointStore.save` of an automatic checkpoint then `prune({KEEP})` (as `CheckpointMiddleware` "
        f"does after a turn), on sessions whose `checkpoints.json` holds {KEEP} automatic checkpoints; each prune "
        "drops the oldest one. Both rewrite the file atomically (temporary file, rename). A checkpoint is a message "
        "id, so neither depends on the history's length. `checkpoint()` is the public "
        "`await CheckpointMiddleware.checkpoint(messages)` (through a worker thread).",
        "",
        f"Target: save and prune under {fmt_time(TARGET_S)} (median) at {TARGET_SIZE:,} messages (default "
        f"settings): save {fmt_time(t.save.median)}, prune {fmt_time(t.prune.median)} "
        f"({'met' if r.ok else '**missed**'}).",
        "",
        "| History | fsync | save: median | p90 | prune: median | p90 | checkpoint(): median | rewind() | "
        "checkpoints.json |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {c.size:,} | {'yes' if c.fsync else 'no'} | {fmt_time(c.save.median)} | {fmt_time(c.save.p90)} | "
        f"{fmt_time(c.prune.median)} | {fmt_time(c.prune.p90)} | {fmt_time(c.api.median)} | "
        f"{fmt_time(c.rewind.median)} | {c.file_bytes:,} B |"
        for c in r.cases
    ]
    lines += [
        "",
        f"{r.iterations} timed saves and prunes per row; `rewind()`: median of {REWINDS}, to the last message of "
        "a history never compacted, so every message is read back from messages.json (linear in the history; "
        "after a compaction only the working context is read). With `fsync=True` each write waits for the disk "
        "(as `ContextManagerMiddleware(fsync=True)` does for the history): that row measures the disk. Load "
        f"average (1 min) at the end: {r.load}.",
        "",
    ]
    return lines


def print_checkpoints(r: CheckpointResults) -> None:
    for c in r.cases:
        print(
            f"checkpoints @ {c.size:>6,} fsync={c.fsync!s:<5}: save median {fmt_time(c.save.median)} p90 "
            f"{fmt_time(c.save.p90)}; prune median {fmt_time(c.prune.median)} p90 {fmt_time(c.prune.p90)}; "
            f"checkpoint() {fmt_time(c.api.median)}; rewind {fmt_time(c.rewind.median)}; file {c.file_bytes:,} B"
        )
    print(f"checkpoints: {'ok' if r.ok else 'MISSED'}")


if __name__ == "__main__":  # python benchmarks/checkpoints.py [iterations]
    import sys

    result = asyncio.run(run_checkpoints(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
    print_checkpoints(result)
    sys.exit(0 if result.ok else 1)
