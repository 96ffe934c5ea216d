"""One compaction of a long history: how many summarizer calls, and the time spent outside the model (issue 10).

Run from the repository root:

    python benchmarks/compaction.py            # 10,000 messages, 5 rounds
    python benchmarks/compaction.py --rounds 3 --size 2000

Each round builds a fresh history (untimed: no cache is warm) and compacts it once with every subject, the
subjects taking turns so a burst of load on a shared machine hits them alike; the median is reported.

- The summary model is a `FunctionModel` that answers at once with a valid summary and reports its usage (so
  pydantic-ai does not estimate it). Its window is unknown, so the summarizer assumes the agent's budget
  (200,000 tokens here). The time spent inside the model function is subtracted: what remains is the toolkit's
  own work (counting, planning, rendering the span, checking the summary, assembling), plus pydantic-ai's
  per-call overhead.
- Target (issue 10): ceil(span tokens / (summarizer window - reserve)) summarizer calls, and an overhead close
  to pydantic-ai-harness's (235 ms at 10,000 messages on the issue's machine).

The script only uses names that existed before issue 10, so it also runs against an older checkout
(`PYTHONPATH=/path/to/checkout python benchmarks/compaction.py`) for a before/after comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from _common import build_history, fmt_time, summary_response
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import ContextManagerMiddleware, SummarizationProcessor, render_messages

WINDOW = 200_000
RESERVE = 8_000
KEEP = 10


@dataclass
class SummaryModel:
    """Answers every summary request at once; counts the calls and the time spent inside."""

    calls: int = 0
    inside_s: float = 0.0

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        start = time.perf_counter()
        self.calls += 1
        response = summary_response(messages)
        self.inside_s += time.perf_counter() - start
        return response


Compact = Callable[[list[ModelMessage]], Awaitable[list[ModelMessage]]]


def subjects() -> dict[str, tuple[Compact, SummaryModel | None]]:
    """Fresh subjects: (compact, the summary model or None for the deterministic summarizer)."""
    processor_model, middleware_model = SummaryModel(), SummaryModel()
    processor_llm = SummarizationProcessor(FunctionModel(processor_model), trigger=None, keep=KEEP, max_tokens=WINDOW)
    processor_none = SummarizationProcessor(None, trigger=None, keep=KEEP, max_tokens=WINDOW)
    middleware_llm = ContextManagerMiddleware(
        summarization_model=FunctionModel(middleware_model), keep=KEEP, max_tokens=WINDOW
    )
    middleware_none = ContextManagerMiddleware(summarization_model=None, keep=KEEP, max_tokens=WINDOW)
    return {
        "SummarizationProcessor, FunctionModel summarizer": (processor_llm.compact, processor_model),
        "SummarizationProcessor, model=None": (processor_none.compact, None),
        "ContextManagerMiddleware, FunctionModel summarizer": (middleware_llm.compact, middleware_model),
        "ContextManagerMiddleware, summarization_model=None": (middleware_none.compact, None),
    }


@dataclass
class Result:
    overhead: list[float] = field(default_factory=list[float])
    calls: list[int] = field(default_factory=list[int])


def expected_calls(history: list[ModelMessage]) -> int:
    """ceil(span tokens / (window - reserve)), the span's tokens estimated from its rendering."""
    span_chars = len(render_messages(history[1:-KEEP]))
    return math.ceil(span_chars / 4 / (WINDOW - RESERVE))


async def run(size: int, rounds: int) -> tuple[dict[str, Result], int]:
    results: dict[str, Result] = {}
    expected = 0
    for _ in range(rounds):
        for name in subjects():
            history, _ = build_history(size)
            if isinstance(history[-1], ModelResponse):  # pragma: no cover - build_history ends with a request
                history.append(ModelRequest(parts=[UserPromptPart("continue")]))
            expected = expected or expected_calls(history)
            compact, model = subjects()[name]
            gc.collect()
            gc.disable()
            try:
                start = time.perf_counter()
                out = await compact(history)
                elapsed = time.perf_counter() - start
            finally:
                gc.enable()
            assert len(out) < len(history)
            result = results.setdefault(name, Result())
            result.overhead.append(elapsed - (model.inside_s if model else 0.0))
            result.calls.append(model.calls if model else 0)
    return results, expected


def markdown_lines(results: dict[str, Result], expected: int, size: int, rounds: int) -> list[str]:
    """The section of docs/benchmarks.md (`benchmarks/run.py` writes the page)."""
    lines = [
        "## One compaction of a long history (issue 10)",
        "",
        f"Compacting {size:,} messages once (keep {KEEP}), median of {rounds} rounds: the summarizer calls and the",
        "time spent outside the summary model (`benchmarks/compaction.py`). Target: "
        f"ceil(span tokens / ({WINDOW:,} - {RESERVE:,})) = {expected} calls, and an overhead close to",
        "pydantic-ai-harness's (235 ms at 10,000 messages, measured for issue 10 on this machine).",
        "",
        "| Subject | Summarizer calls | Overhead (median) | min | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, result in results.items():
        lines.append(
            f"| {name} | {statistics.median(result.calls):g} | {fmt_time(statistics.median(result.overhead))} "
            f"| {fmt_time(min(result.overhead))} | {fmt_time(max(result.overhead))} |"
        )
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results, expected = asyncio.run(run(args.size, args.rounds))
    print("\n".join(markdown_lines(results, expected, args.size, args.rounds)))


if __name__ == "__main__":
    main()
