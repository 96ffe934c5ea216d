"""Property tests: `ImportancePruner` never drops a must-keep message, never splits a tool call from its results,
keeps chronological order and always returns a valid history, whatever the history, target and settings."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable

import pydantic_ai.models
from example_counts import examples
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from strategies import histories

from summarization_pydantic_ai import (
    ContextEvent,
    ContextReduced,
    ImportancePruner,
    count_tokens_approximately,
    is_summary_message,
    validate_history,
)

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False


def _texts(message: ModelMessage) -> bool:
    return isinstance(message, ModelResponse) and any(isinstance(p, TextPart) for p in message.parts)


def _mentions_fix(message: ModelMessage) -> bool:
    return any("fix" in str(getattr(p, "content", "")) for p in message.parts)


PREDICATES: tuple[Callable[[ModelMessage], bool] | None, ...] = (None, _texts, _mentions_fix)


class _Warnings(logging.Handler):
    """The pruner's guard logs a warning when its output would be invalid and returns the input instead: a property
    that only checked validity would pass on such a bug, so any warning fails the test."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def run_pruner(pruner: ImportancePruner, history: list[ModelMessage]) -> list[ModelMessage]:
    handler = _Warnings()
    logger = logging.getLogger("summarization_pydantic_ai")
    logger.addHandler(handler)
    try:
        result = asyncio.run(pruner(list(history)))
    finally:
        logger.removeHandler(handler)
    assert handler.records == []
    return result


def must_keep(messages: list[ModelMessage], predicate: Callable[[ModelMessage], bool] | None) -> list[int]:
    """The spec, computed independently of the pruner: first instructions, latest user request, latest exchange,
    summaries, and the predicate's messages."""
    responses = [i for i, m in enumerate(messages) if isinstance(m, ModelResponse)]
    first = responses[0] if responses else len(messages)
    last = responses[-1] if responses else 0
    prompts = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
    ]
    keep = set(range(first)) | set(range(last, len(messages))) | set(prompts[-1:])
    keep |= {i for i, m in enumerate(messages) if is_summary_message(m)}
    if predicate is not None:
        keep |= {i for i, m in enumerate(messages) if predicate(m)}
    return sorted(keep)


def origin(messages: list[ModelMessage], result: list[ModelMessage]) -> list[int]:
    """The index in `messages` of each output message (a merged exchange is a copy sharing its parts list)."""
    by_parts = {id(m.parts): i for i, m in enumerate(messages)}
    return [by_parts[id(m.parts)] for m in result]


def call_ids(messages: list[ModelMessage]) -> tuple[set[str], set[str]]:
    calls = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    results = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}
    return calls, results


@examples(150)
@given(
    history=histories(for_request=True, max_turns=6),
    target=st.integers(1, 4_000),
    merge=st.booleans(),
    predicate=st.sampled_from(PREDICATES),
    protect=st.sampled_from((None, 4.0, 100.0)),
)
def test_pruner_keeps_must_keep_pairs_and_order(
    history: list[ModelMessage],
    target: int,
    merge: bool,
    predicate: Callable[[ModelMessage], bool] | None,
    protect: float | None,
) -> None:
    assert validate_history(history) == []
    events: list[ContextEvent] = []
    pruner = ImportancePruner(
        target_tokens=target,
        merge_similar=merge,
        keep_predicate=predicate,
        protect_score=protect,
        event_callback=events.append,
    )
    result = run_pruner(pruner, history)

    assert validate_history(result) == []
    positions = origin(history, result)
    assert positions == sorted(set(positions)), "chronological order, no duplicates"
    assert set(must_keep(history, predicate)) <= set(positions), "a must-keep message was dropped"
    for (a, b), (first, second) in zip(itertools.pairwise(positions), itertools.pairwise(result), strict=True):
        if isinstance(first, ModelResponse) and isinstance(second, ModelResponse):
            assert b == a + 1, "pruning put two model responses side by side"
    for at, message in zip(positions, result, strict=True):
        assert message.parts is history[at].parts, "kept messages are verbatim"
    calls, results = call_ids(result)
    original_calls, original_results = call_ids(history)
    assert calls & original_results <= results, "a kept tool call lost its result"
    assert results & original_calls <= calls, "a kept tool result lost its call"
    before, after = count_tokens_approximately(history), count_tokens_approximately(result)
    if result is history or len(result) == len(history):
        assert before <= target or not events
    else:
        assert after < before
        [event] = events
        assert isinstance(event, ContextReduced) and event.strategy == "importance"
        assert event.messages_after == len(result) and event.tokens_after == after


@examples(50)
@given(history=histories(for_request=True, max_turns=6), target=st.integers(1, 4_000))
def test_pruning_is_stable(history: list[ModelMessage], target: int) -> None:
    """Pruning the pruned history again never breaks it and never removes a message the first pass kept for
    being must-keep."""
    pruner = ImportancePruner(target_tokens=target)
    once = run_pruner(pruner, history)
    twice = run_pruner(pruner, once)
    assert validate_history(twice) == []
    assert set(map(id, (once[i] for i in must_keep(once, None)))) <= set(map(id, twice))
