"""What `CostTrackingMiddleware` adds to a model request, against the length of the history (issue 12).

Run from the repository root:

    python benchmarks/cost.py              # 1,000 and 10,000 messages, 3 rounds
    python benchmarks/cost.py --rounds 5

Each round runs one agent run of `REQUESTS` model requests (a `FunctionModel` that calls a tool, then answers,
with fixed usage and the model name `gpt-4o`) on a history of the given length, with a budget set. The time
spent inside the middleware's two hooks is measured around them (a run of a whole agent on a long history is
dominated by pydantic-ai's own per-request work, and the difference of two such runs drowns in noise on a
shared machine): per request, it is pricing the response (genai-prices), looking for new summaries, counting
the context for the next estimate, pricing that estimate and checking the budget. The run's first request also
reads the session's totals from the history it continues: reported apart, for the first run of the session
through a middleware instance (the whole history is priced) and for the next run (only what was added since).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from _common import build_history, fmt_time
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai import CostTrackingMiddleware

SIZES = (1_000, 10_000)
REQUESTS = 20
USAGE = RequestUsage(input_tokens=50_000, cache_read_tokens=40_000, output_tokens=300)


@dataclass
class Result:
    per_request: list[float] = field(default_factory=list[float])
    first_request: list[float] = field(default_factory=list[float])
    later_run: list[float] = field(default_factory=list[float])
    """The first request of the session's next run through the same middleware (what it priced is kept)."""


class _Timed(CostTrackingMiddleware):
    """The middleware, with the time spent in its hooks written down (per request, in order)."""

    spent: ClassVar[list[float]] = []

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        started = time.perf_counter()
        try:
            return await super().before_model_request(ctx, request_context)
        finally:
            _Timed.spent.append(time.perf_counter() - started)

    async def after_model_request(self, ctx: Any, *, request_context: Any, response: ModelResponse) -> Any:
        started = time.perf_counter()
        try:
            return await super().after_model_request(ctx, request_context=request_context, response=response)
        finally:
            _Timed.spent[-1] += time.perf_counter() - started


def _model() -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls = sum(1 for m in messages[-2 * REQUESTS :] if isinstance(m, ModelResponse) and m.model_name)
        if calls < REQUESTS - 1:
            return ModelResponse(parts=[ToolCallPart("noop", {}, tool_call_id=f"c{len(messages)}")], usage=USAGE)
        return ModelResponse(parts=[TextPart("done")], usage=USAGE)

    return FunctionModel(answer, model_name="gpt-4o")


def _agent(capabilities: list[Any]) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(_model(), capabilities=capabilities)

    @agent.tool_plain
    def noop() -> str:
        return "ok"

    return agent


async def run(sizes: tuple[int, ...], rounds: int) -> dict[int, Result]:
    results: dict[int, Result] = {}
    for size in sizes:
        history, _ = build_history(size)
        history = history[:-1]  # the run adds its own prompt
        result = results[size] = Result()
        for _ in range(rounds):
            _Timed.spent.clear()
            gc.collect()
            agent = _agent([_Timed(max_cost_usd=1_000)])
            first = await agent.run("go on", message_history=history)
            assert len(_Timed.spent) == REQUESTS
            result.first_request.append(_Timed.spent[0])
            result.per_request.extend(_Timed.spent[1:])
            _Timed.spent.clear()
            gc.collect()
            await agent.run("and then?", message_history=first.all_messages())  # the session's next run
            result.later_run.append(_Timed.spent[0])
    return results


def markdown_lines(results: dict[int, Result], rounds: int) -> list[str]:
    """The section of docs/benchmarks.md (`benchmarks/run.py` writes the page)."""
    lines = [
        "## CostTrackingMiddleware per request (issue 12)",
        "",
        f"The time spent in the middleware's hooks (`benchmarks/cost.py`): {rounds} runs of {REQUESTS} requests on a",
        "history of the given length, with a budget set (the estimate of each next request is priced too). The",
        "first request of a run also reads the session's totals from the history the run continues, once per run:",
        "the whole history the first time a middleware instance sees the session, then only what was added since",
        "(the next run of the session through the same instance, as in a chat).",
        "",
        "| History | Per request (median) | p90 | First request of a run (median) | Of the next run (median) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for size, result in results.items():
        per_request = sorted(result.per_request)
        lines.append(
            f"| {size:,} | {fmt_time(statistics.median(per_request))} "
            f"| {fmt_time(per_request[int(len(per_request) * 0.9)])} "
            f"| {fmt_time(statistics.median(result.first_request))} "
            f"| {fmt_time(statistics.median(result.later_run))} |"
        )
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = asyncio.run(run(SIZES, args.rounds))
    print("\n".join(markdown_lines(results, args.rounds)))


if __name__ == "__main__":
    main()
