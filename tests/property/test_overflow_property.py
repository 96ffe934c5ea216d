"""Property tests: the overflow ladder's output never grows, adds no history problem and keeps the latest user
request, whatever the history (valid or damaged), the target and the counter."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any

import pydantic_ai.models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from strategies import COUNTERS, histories, histories_with_faults

from summarization_pydantic_ai import ContextManagerMiddleware, async_count_tokens, validate_history
from summarization_pydantic_ai._sizes import Measure
from summarization_pydantic_ai.context_manager._overflow import LADDER, Ladder, LadderResult

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))
_OVERHEAD = 120  # instructions and tool definitions: counted in every estimate, cut by no step
_BUDGET = 20_000


def _problems(messages: list[ModelMessage]) -> Counter[tuple[str, str | None]]:
    return Counter((p.kind, p.tool_call_id) for p in validate_history(messages))


def _latest_prompt_texts(messages: list[ModelMessage]) -> list[Any]:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            prompts = [p.content for p in message.parts if isinstance(p, UserPromptPart)]
            if prompts:
                return prompts
    return []


def _run_ladder(messages: list[ModelMessage], fraction: float, counter: Any) -> tuple[int, LadderResult, int]:
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=_BUDGET, token_counter=counter)

    async def estimate(history: list[ModelMessage]) -> int:
        return await async_count_tokens(counter, history) + _OVERHEAD

    async def summarize(history: list[ModelMessage], tokens: int) -> list[ModelMessage]:
        size = Measure(len(history), tokens, _BUDGET)
        return await middleware._compress(history, size, _BUDGET, None, None, None)  # pyright: ignore[reportPrivateUsage]

    async def go() -> tuple[int, LadderResult, int]:
        tokens = await estimate(messages)
        result = await Ladder(estimate, counter, _BUDGET, summarize).run(list(messages), tokens, int(tokens * fraction))
        return tokens, result, await estimate(result.messages)

    return asyncio.run(go())


@settings(max_examples=int(400 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(histories(max_turns=6), histories_with_faults()),
    st.floats(0.0, 1.0),
    st.sampled_from(COUNTERS),
)
def test_the_ladder_never_grows_and_never_breaks_a_history(
    messages: list[ModelMessage], fraction: float, counter: Any
) -> None:
    before = _problems(messages)
    latest = _latest_prompt_texts(messages)
    tokens, result, measured = _run_ladder(messages, fraction, counter)
    assert measured == result.tokens <= tokens
    if result.steps:
        assert result.tokens < tokens, "a step is kept only when it shrinks the history"
        assert list(result.steps) == sorted(result.steps, key=LADDER.index)
    else:
        assert result.messages == messages
    assert not _problems(result.messages) - before, "the ladder added a history problem"
    if not before:
        assert validate_history(result.messages) == []
    # The latest request survives whole: where it was, or carried verbatim by a summary or a window marker; only when
    # every other step left the history too long is its text clamped (the last step): its head and tail stay.
    after = _latest_prompt_texts(result.messages)
    assert len(after) == len(latest)
    for old, new in zip(latest, after, strict=True):
        if new != old:
            assert result.steps[-1] == "clamp_latest_request"  # the last resort, after everything else
            items = [(old, new)] if isinstance(old, str) else list(zip(old, new, strict=True))
            for o, n in items:
                assert n == o or (n[:40] == o[:40] and "the middle was cut" in n)
