"""Property tests (issue 9): a compaction's keep windows never split a response's tool results and never
multiply earlier faults, whatever the head, the tail (messages, tokens, fraction) and the history."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pydantic_ai.models
from example_counts import examples, in_two_tiers
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from strategies import histories, histories_with_faults, keeps

from summarization_pydantic_ai import ContextManagerMiddleware, SummarizationProcessor, validate_history

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False


def problems(messages: list[ModelMessage]) -> Counter[tuple[str, str | None]]:
    return Counter((p.kind, p.tool_call_id) for p in validate_history(messages))


def latest_prompt(messages: list[ModelMessage]) -> list[UserPromptPart]:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            prompts = [p for p in message.parts if isinstance(p, UserPromptPart)]
            if prompts:
                return prompts
    return []


def check(messages: list[ModelMessage], out: list[ModelMessage]) -> None:
    before, after = problems(messages), problems(out)
    assert not after - before, (before, after)  # no new problem, and no second one of a kind already there
    assert latest_prompt(out) == latest_prompt(messages)  # the latest request, whole
    kept = {id(p) for m in out if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)}
    for message in messages:  # one response's results: all kept, or all summarized
        if isinstance(message, ModelRequest):
            ids = {id(p) for p in message.parts if isinstance(p, ToolReturnPart)}
            assert not ids or ids <= kept or not ids & kept


def _summarization_never_splits_results_nor_multiplies_faults(
    messages: list[ModelMessage], keep: Any, keep_head: int
) -> None:
    trigger = ("messages", 10_000)  # compact() summarizes whatever the trigger says
    processor = SummarizationProcessor(None, trigger=trigger, keep=keep, keep_head=keep_head, max_tokens=20_000)
    out = asyncio.run(processor.compact(messages))
    check(messages, out)


(
    test_summarization_never_splits_results_nor_multiplies_faults,
    test_summarization_never_splits_results_nor_multiplies_faults_full,
) = in_two_tiers(
    _summarization_never_splits_results_nor_multiplies_faults,
    st.one_of(histories(max_turns=6), histories_with_faults()),
    keeps(),
    st.integers(0, 6),
    quick=300,
    full=1_000,
)


@examples(300)
@given(st.one_of(histories(max_turns=6), histories_with_faults()), keeps())
def test_middleware_compact_never_splits_results_nor_multiplies_faults(messages: list[ModelMessage], keep: Any) -> None:
    middleware = ContextManagerMiddleware(max_tokens=20_000, keep=keep, summarization_model=None)
    out = asyncio.run(middleware.compact(messages))
    check(messages, out)
