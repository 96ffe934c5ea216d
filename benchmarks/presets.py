"""The `medium` preset's per-request overhead at 1,000 messages (issue 13, acceptance "Benchmark").

Run from the repository root:

    python benchmarks/presets.py            # 1,000 messages, 10 runs of 20 requests
    python benchmarks/presets.py --runs 3

The medium preset is `ContextConfig(compression_level="medium")` with its defaults (the `hybrid` strategy when it
is available, else `sliding_window`), its whole stack from `capabilities()`: `ContextMetrics`, the strategy's
processors and `ContextManagerMiddleware` (no history file). The window is far above the history, so no step
reduces anything: the steady state "when nothing new needs compressing".

Each run is an `Agent.run` over the same 1,000-message history (`_common.build_history`: tool calls answered by
~2 KB returns) with a `FunctionModel` that makes 20 requests (19 tool calls, then an answer). Two timing
capabilities bracket the stack — one outermost, one innermost — and time its `before_model_request` hooks and its
`after_model_request` hooks on every request; the first request of each run (a history the stack has not seen in
this run) is reported apart. Target: median under 2 ms per request after the first.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from _common import Timing, build_history, fmt_time
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import STRATEGIES, ContextConfig

SIZE = 1_000
REQUESTS_PER_RUN = 20
TARGET_S = 2e-3
NEVER = 10**9  # the window: far above the history, so nothing is reduced


@dataclass
class Clock:
    """Shared by the two bracket capabilities: the time spent between them, per request."""

    before_start: float = 0.0
    after_start: float = 0.0
    pending: float = 0.0
    first: list[float] = field(default_factory=list[float])
    later: list[float] = field(default_factory=list[float])
    request: int = 0


@dataclass
class _Outer(AbstractCapability[Any]):
    clock: Clock

    async def before_model_request(self, ctx: RunContext[Any], request_context: ModelRequestContext) -> Any:
        self.clock.before_start = time.perf_counter()
        return request_context

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        clock = self.clock
        total = clock.pending + time.perf_counter() - clock.after_start
        (clock.first if clock.request == 1 else clock.later).append(total)
        return response


@dataclass
class _Inner(AbstractCapability[Any]):
    clock: Clock

    async def before_model_request(self, ctx: RunContext[Any], request_context: ModelRequestContext) -> Any:
        self.clock.pending = time.perf_counter() - self.clock.before_start
        self.clock.request += 1
        return request_context

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        self.clock.after_start = time.perf_counter()
        return response


def medium_preset() -> ContextConfig:
    strategy = "hybrid" if "hybrid" in STRATEGIES else "sliding_window"
    return ContextConfig(strategy, compression_level="medium", max_tokens=NEVER)  # type: ignore[arg-type]


def _model() -> FunctionModel:
    calls = [0]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls[0] += 1
        if calls[0] % REQUESTS_PER_RUN == 0:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": f"src/m{len(messages)}.py"})])

    return FunctionModel(respond)


@dataclass
class Result:
    strategy: str
    stack: list[str]
    first: Timing
    later: Timing

    @property
    def ok(self) -> bool:
        return self.later.median < TARGET_S


async def run(runs: int) -> Result:
    config = medium_preset()
    clock = Clock()
    stack = config.capabilities()
    agent = Agent(_model(), capabilities=[_Outer(clock), *stack, _Inner(clock)])

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"# {path}\n" + "def handler(request):\n    return process(request)\n" * 40

    history, _ = build_history(SIZE)
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            clock.request = 0
            await agent.run("continue with the next module", message_history=history[:-1])
    finally:
        gc.enable()
    return Result(config.strategy, [type(c).__name__ for c in stack], Timing(clock.first), Timing(clock.later))


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "unknown"


def markdown_lines(result: Result) -> list[str]:
    """The section of docs/benchmarks.md (`benchmarks/run.py` writes the page)."""
    verdict = "ok" if result.ok else "MISSED"
    return [
        "## Strategy presets: the medium preset's per-request overhead (issue 13)",
        "",
        f"`ContextConfig({result.strategy!r}, compression_level='medium')`, its whole stack "
        f"({' → '.join(result.stack)}), in `Agent.run` over a {SIZE:,}-message history, the window far above it "
        f"(nothing to compress), {REQUESTS_PER_RUN} requests per run (`benchmarks/presets.py`). Time spent in the "
        f"stack's `before_model_request` and `after_model_request` hooks per request. Target: under "
        f"{fmt_time(TARGET_S)} per request.",
        "",
        f"Measured {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, load average {_load()} on "
        f"{os.cpu_count()} logical cores (a shared machine: single requests can be slow outliers, compare medians).",
        "",
        "| Requests | Count | Median | p90 | Target |",
        "|---|---:|---:|---:|---|",
        f"| later requests of a run | {len(result.later.samples)} | {fmt_time(result.later.median)} "
        f"| {fmt_time(result.later.p90)} | {verdict} |",
        f"| first request of a run | {len(result.first.samples)} | {fmt_time(result.first.median)} "
        f"| {fmt_time(result.first.p90)} | (reported) |",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    result = asyncio.run(run(args.runs))
    print("\n".join(markdown_lines(result)))
    print(f"mean later: {fmt_time(statistics.mean(result.later.samples))}")


if __name__ == "__main__":
    main()
