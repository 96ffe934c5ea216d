"""One compaction firing at 10,000 messages inside `Agent.run`: ours against pydantic-ai-harness (issue 23, item 4).

Run from the repository root (the harness in a throwaway virtualenv of its own, never a dependency of ours: it
pins an older pydantic-ai):

    python3 -m venv /tmp/harness-venv && /tmp/harness-venv/bin/pip install pydantic-ai-harness
    python benchmarks/compaction_peer.py                 # 10,000 messages, 5 rounds, prints the section
    python benchmarks/compaction_peer.py --write         # ... and writes it into docs/benchmarks.md
    python benchmarks/compaction_peer.py --harness-python /path/to/python --rounds 3 --size 2000

Each measurement is a fresh process (ours: this interpreter; the harness: `--harness-python`), the sides taking
turns (the harness first in even rounds), so a burst of load on this shared machine hits both alike. In each
process one compaction of a 400-message history warms the code up, then one `Agent.run` is given the
10,000-message history of `_common.build_history` and its first request crosses the trigger:

- the summary model is a `FunctionModel` that answers at once with a well-formed summary (ours: the sections the
  summary check asks for and the latest request, as a model would), reporting its usage;
- what is timed is the capability's `before_model_request` hook (wall clock and process CPU), less the time
  spent inside the summary model: rendering, chunking, checking, validating, recording, ids, and the per-call
  cost of the model requests. Ours keeps 10 messages (`keep=("messages", 10)`), the harness `keep_messages=10`;
  the harness reads tool returns cut to 500 characters in one call, ours reads them whole in chunks that fit the
  summary model's window (200,000 tokens assumed here), so ours makes ~14 calls to its one.

The deterministic summarizer alone on a 10,000-message span is timed too (target: under 250 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import build_history, environment, fmt_time, summary_response, write_section

SIZE = 10_000
WARM_UP_SIZE = 400
KEEP = 10
WINDOW = 200_000
HARNESS = "/tmp/harness-venv/bin/python"
OURS = ("middleware", "processor")
SUBJECTS = {
    "middleware": "ContextManagerMiddleware, FunctionModel summarizer",
    "processor": "SummarizationProcessor, FunctionModel summarizer",
    "harness": "pydantic-ai-harness SummarizingCompaction, FunctionModel summarizer",
}
DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


class Clock:
    """Time spent in the hook, and inside the summary model (subtracted)."""

    def __init__(self) -> None:
        self.hook_wall = self.hook_cpu = self.model_wall = self.model_cpu = 0.0
        self.calls = 0


CLOCK = Clock()


def summary_answer(messages: list[Any], info: Any) -> Any:
    """A well-formed summary, answered at once (the time inside is subtracted)."""
    wall, cpu = time.perf_counter(), time.process_time()
    CLOCK.calls += 1
    response = summary_response(messages)
    CLOCK.model_wall += time.perf_counter() - wall
    CLOCK.model_cpu += time.process_time() - cpu
    return response


def agent_response(messages: list[Any], info: Any) -> Any:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.usage import RequestUsage

    return ModelResponse(parts=[TextPart("done")], usage=RequestUsage(input_tokens=10, output_tokens=2))


def timed(cls: type) -> type:
    """`cls` with its `before_model_request` hook timed into `CLOCK`."""

    class Timed(cls):  # type: ignore[misc, valid-type]
        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return await super().before_model_request(ctx, request_context)
            finally:
                CLOCK.hook_wall += time.perf_counter() - wall
                CLOCK.hook_cpu += time.process_time() - cpu

    return Timed


def capability(side: str, window: int) -> Any:
    from pydantic_ai.models.function import FunctionModel

    summarizer = FunctionModel(summary_answer)
    if side == "harness":
        from pydantic_ai_harness.compaction import SummarizingCompaction  # pyright: ignore

        return timed(SummarizingCompaction)(model=summarizer, max_tokens=int(window * 0.9), keep_messages=KEEP)
    from summarization_pydantic_ai import ContextManagerMiddleware, SummarizationProcessor

    if side == "middleware":
        return timed(ContextManagerMiddleware)(
            summarization_model=summarizer, keep=("messages", KEEP), max_tokens=window
        )
    return timed(SummarizationProcessor)(summarizer, trigger=("fraction", 0.9), keep=KEEP, max_tokens=window)


async def compaction_once(side: str, size: int, window: int) -> dict[str, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    history, _ = build_history(size)
    agent = Agent(FunctionModel(agent_response), capabilities=[capability(side, window)])
    global CLOCK
    CLOCK = Clock()
    gc.collect()
    result = await agent.run("continue", message_history=history)
    after = len(result.all_messages())
    assert after < len(history), f"{side}: no compaction happened"
    return {
        "wall": CLOCK.hook_wall - CLOCK.model_wall,
        "cpu": CLOCK.hook_cpu - CLOCK.model_cpu,
        "calls": CLOCK.calls,
        "messages_after": after,
    }


def deterministic_span(size: int) -> float:
    """The deterministic summarizer alone on a span of `size` messages (CPU seconds)."""
    from summarization_pydantic_ai.summarize import DeterministicSummarizer, SummaryRequest

    history, _ = build_history(size)
    request = SummaryRequest(messages=history[1:], first_index=1)
    summarizer = DeterministicSummarizer()
    summarizer.summarize_sync(SummaryRequest(messages=history[1:WARM_UP_SIZE], first_index=1))
    gc.collect()
    start = time.process_time()
    summarizer.summarize_sync(request)
    return time.process_time() - start


def measure_side(side: str, size: int) -> dict[str, Any]:
    """In this process: warm up on a short history, then time one compaction at `size` messages."""
    asyncio.run(compaction_once(side, WARM_UP_SIZE, 20_000))
    figures = asyncio.run(compaction_once(side, size, WINDOW))
    if side == "middleware":
        figures["deterministic_cpu"] = deterministic_span(size)
    return figures


def in_subprocess(python: str, side: str, size: int) -> dict[str, Any] | None:
    command = [python, str(Path(__file__).resolve()), "--side", side, "--size", str(size)]
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"{side}: {exc}", file=sys.stderr)
        return None
    if done.returncode != 0:
        print(f"{side} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(size: int, rounds: int, harness: str) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in (*OURS, "harness")}
    for i in range(rounds):
        order = [("harness", harness), *((side, sys.executable) for side in OURS)]
        if i % 2:
            order.reverse()
        for side, python in order:
            figures = in_subprocess(python, side, size)
            if figures is not None:
                results[side].append(figures)
                print(f"round {i + 1} {side}: {figures}", file=sys.stderr)
    return results


def _median(samples: list[dict[str, Any]], key: str) -> float:
    return statistics.median(s[key] for s in samples)


def markdown_lines(results: dict[str, list[dict[str, Any]]], size: int, rounds: int) -> list[str]:
    harness = results["harness"]
    lines = [
        "## One compaction at 10,000 messages inside Agent.run, against pydantic-ai-harness (issue 23)",
        "",
        f"`benchmarks/compaction_peer.py`: one `Agent.run` given a {size:,}-message history, its first request over",
        "the trigger; the time in the capability's `before_model_request` hook outside the summary model (a",
        "`FunctionModel` answering at once), each side in a fresh process after a warm-up compaction, the sides",
        f"alternating, {rounds} rounds, medians. The harness (pydantic-ai-harness with its pinned pydantic-ai) runs",
        "in a virtualenv of its own. Target: ours <= 1.0x the harness in the same run.",
        "",
        "| Subject | Summary calls | Wall (median) | CPU (median) | Wall vs harness | CPU vs harness |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for side in (*OURS, "harness"):
        samples = results[side]
        if not samples:
            continue
        wall, cpu = _median(samples, "wall"), _median(samples, "cpu")
        ratios = ("", "")
        if harness:
            ratios = (f"{wall / _median(harness, 'wall'):.2f}x", f"{cpu / _median(harness, 'cpu'):.2f}x")
        calls = statistics.median(s["calls"] for s in samples)
        lines.append(
            f"| {SUBJECTS[side]} | {calls:g} | {fmt_time(wall)} | {fmt_time(cpu)} | {ratios[0]} | {ratios[1]} |"
        )
    deterministic = [s["deterministic_cpu"] for s in results["middleware"] if "deterministic_cpu" in s]
    if deterministic:
        lines += [
            "",
            f"The deterministic summarizer alone on a {size:,}-message span (CPU, median): "
            f"{fmt_time(statistics.median(deterministic))} (target: under 250 ms).",
        ]
    if not harness:
        lines += ["", "The harness was not measured: no working interpreter at `--harness-python`."]
    return [*lines, "", f"Measured {environment()}.", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--harness-python", default=HARNESS)
    parser.add_argument("--side", choices=[*OURS, "harness"], help=argparse.SUPPRESS)
    parser.add_argument("--write", action="store_true", help="write the section into docs/benchmarks.md")
    args = parser.parse_args()
    if args.side:
        print(json.dumps(measure_side(args.side, args.size)))
        return
    results = run(args.size, args.rounds, args.harness_python)
    lines = markdown_lines(results, args.size, args.rounds)
    print("\n".join(lines))
    if args.write:
        write_section(DOCS, "compaction-vs-harness", lines)


if __name__ == "__main__":
    main()
