"""The deterministic summarizer on long spans (issue 23): its time against a floor, and its size.

Run from the repository root:

    python benchmarks/deterministic_summary.py            # 1,000 and 10,000 messages, 7 rounds; writes the page
    python benchmarks/deterministic_summary.py --no-write

What is measured: `DeterministicSummarizer().summarize_sync(request)` on the span a compaction of a generated
history would replace (everything but the first request and the last 10 messages; the history of
`benchmarks/_common.py`: tool calls with ~2 KB outputs, a user prompt every ~20 messages). The floor is one pass
that reads every part's text (`part_text`), the least any summary of the span must do. The two take turns on the
same span in each round (gc paused), so a burst of load on this shared machine hits both alike; the process's CPU
time is reported beside the wall clock, which on 2 shared cores also counts the waits for a core.
Target (issue 23): under 250 ms at 10,000 messages, and a time that grows linearly with the span.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from _common import build_history, environment, fmt_time, write_section
from pydantic_ai.messages import ModelMessage

from summarization_pydantic_ai import DeterministicSummarizer, SummaryRequest
from summarization_pydantic_ai._render import part_text

PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "deterministic-summary"
TARGET_S = 0.250
SIZES = (1_000, 10_000)


def floor(span: list[ModelMessage]) -> int:
    return sum(len(part_text(part)) for message in span for part in message.parts)


def timed(function: Callable[[], object]) -> tuple[float, float]:
    """(wall clock, CPU time of this process) of one call, gc paused."""
    gc.collect()
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        gc.enable()


def measure(size: int, rounds: int) -> tuple[float, float, float, int]:
    """Medians: our wall clock, our CPU time, the floor's CPU time; and the summary's length."""
    history, _ = build_history(size)
    span = history[1:-10]
    request = SummaryRequest(messages=span, first_index=1, latest_request_kept=True)
    summarizer = DeterministicSummarizer()
    summary = summarizer.summarize_sync(request)  # warm-up (imports, regular expressions)
    ours: list[tuple[float, float]] = []
    floors: list[tuple[float, float]] = []
    for _ in range(rounds):
        ours.append(timed(lambda: summarizer.summarize_sync(request)))
        floors.append(timed(lambda: floor(span)))
    wall = statistics.median(w for w, _ in ours)
    cpu = statistics.median(c for _, c in ours)
    return wall, cpu, statistics.median(c for _, c in floors), len(summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    rows = [(size, *measure(size, args.rounds)) for size in SIZES]
    lines = [
        "## The deterministic summarizer on long spans (issue 23)",
        "",
        "`DeterministicSummarizer().summarize_sync` on the span a compaction would replace (`benchmarks/"
        "deterministic_summary.py`), against a floor that only reads every part's text once, the two taking turns "
        f"on the same span; median of {args.rounds} rounds. Target: under {fmt_time(TARGET_S)} at 10,000 messages, "
        "linear in the span.",
        "",
        "| Span | Summarizer, CPU (median) | Summarizer, wall clock | Floor, CPU | Ratio (CPU) | Summary |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for size, wall, cpu, base, chars in rows:
        lines.append(
            f"| {size - 10:,} messages | {fmt_time(cpu)} | {fmt_time(wall)} | {fmt_time(base)} | {cpu / base:.1f}x "
            f"| {chars:,} chars |"
        )
    met = rows[-1][2] < TARGET_S
    lines += [
        "",
        f"Measured {environment()}. On 2 shared cores the wall clock adds the waits for a core (up to about "
        f"load / 2 times the CPU time), so the target is judged on CPU time: {'met' if met else 'missed'}.",
    ]
    print("\n".join(lines))
    if not args.no_write:
        write_section(PAGE, SECTION, lines)


if __name__ == "__main__":
    main()
