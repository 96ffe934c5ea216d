"""Property test (issue 23, scope 3): for any history, every compaction path leaves no more tokens than it found,
or does not compact; what it leaves passes `validate_history` (no problem the input did not have)."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any

import pydantic_ai.models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage
from strategies import histories, histories_with_faults, keeps

from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    PhaseCheckpoints,
    SlidingWindowProcessor,
    SummarizationProcessor,
    count_tokens_approximately,
    validate_history,
)
from summarization_pydantic_ai._sizes import Measure
from summarization_pydantic_ai.context_manager._overflow import Ladder

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))
_BUDGET = 20_000


def _problems(messages: list[ModelMessage]) -> Counter[tuple[str, str | None]]:
    return Counter((p.kind, p.tool_call_id) for p in validate_history(messages))


async def _summarization(messages: list[ModelMessage], keep: Any) -> list[ModelMessage]:
    return await SummarizationProcessor(None, trigger=None, keep=keep, max_tokens=_BUDGET).compact(messages)


def _firing(keep: Any) -> tuple[str, int]:
    """A trigger that fires on any history, of another kind than `keep` (a keep must be below a trigger of its kind)."""
    kind = keep if isinstance(keep, int) else keep[0]
    return ("tokens", 1) if kind == "messages" or isinstance(kind, int) else ("messages", 1)


async def _summarization_trigger(messages: list[ModelMessage], keep: Any) -> list[ModelMessage]:
    processor = SummarizationProcessor(None, trigger=_firing(keep), keep=keep, max_tokens=_BUDGET)
    return await processor(messages)


async def _middleware(messages: list[ModelMessage], keep: Any) -> list[ModelMessage]:
    return await ContextManagerMiddleware(max_tokens=_BUDGET, keep=keep, summarization_model=None).compact(messages)


async def _sliding(messages: list[ModelMessage], keep: Any) -> list[ModelMessage]:
    return await SlidingWindowProcessor(trigger=_firing(keep), keep=keep, max_tokens=_BUDGET)(messages)


async def _agent_fallback(messages: list[ModelMessage], keep: Any) -> list[ModelMessage]:
    """What `AgentDrivenCompression` falls back to: the middleware keeping half its target in tokens."""
    return await ContextManagerMiddleware(max_tokens=_BUDGET, keep=("tokens", 2_000), summarization_model=None).compact(
        messages
    )


async def _overflow_ladder(messages: list[ModelMessage], keep: Any) -> list[ModelMessage]:
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=_BUDGET)

    async def estimate(history: list[ModelMessage]) -> int:
        return count_tokens_approximately(history)

    async def summarize(history: list[ModelMessage], tokens: int) -> list[ModelMessage]:
        size = Measure(len(history), tokens, _BUDGET)
        return await middleware._compress(history, size, _BUDGET, None, None, None)  # pyright: ignore[reportPrivateUsage]

    tokens = count_tokens_approximately(messages)
    ladder = Ladder(estimate, count_tokens_approximately, _BUDGET, summarize)
    return (await ladder.run(list(messages), tokens, tokens // 4)).messages


async def _phase_checkpoint(messages: list[ModelMessage], keep: Any) -> list[ModelMessage]:
    phases = PhaseCheckpoints()
    phases.mark_done("done", state={"notes": "what the phase established"}, objectives=["finish"])
    return await phases(messages)


PATHS = {
    "summarization": _summarization,
    "summarization trigger": _summarization_trigger,
    "middleware": _middleware,
    "sliding": _sliding,
    "agent-driven fallback": _agent_fallback,
    "overflow ladder": _overflow_ladder,
    "phase checkpoint": _phase_checkpoint,
}


@settings(max_examples=int(150 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(histories(max_turns=6), histories_with_faults()),
    keeps(),
    st.sampled_from(sorted(PATHS)),
)
def test_no_compaction_path_leaves_more_tokens_than_it_found(
    messages: list[ModelMessage], keep: Any, path: str
) -> None:
    before = count_tokens_approximately(messages)
    original = list(messages)
    out = asyncio.run(PATHS[path](messages, keep))
    unchanged = len(out) == len(original) and all(a is b for a, b in zip(out, original, strict=True))
    if not unchanged:
        assert count_tokens_approximately(out) < before, path
    assert count_tokens_approximately(out) <= before
    assert not _problems(out) - _problems(original), path
