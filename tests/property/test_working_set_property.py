"""Property tests: the working set never breaks a history, never grows it, keeps the pinned messages verbatim and
leaves the latest user request the last user prompt, whatever the history, the keep and the pins."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pydantic_ai.models
from example_counts import examples
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, TextPart, UserPromptPart
from strategies import histories, keeps

from summarization_pydantic_ai import (
    CompactionCompleted,
    ContextEvent,
    ContextManagerMiddleware,
    SummarizationProcessor,
    get_message_id,
    is_summary_message,
    validate_history,
)

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False


def _texts(message: ModelMessage) -> bool:
    return isinstance(message, ModelResponse) and any(isinstance(p, TextPart) for p in message.parts)


def _fix_requests(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and any("fix" in str(p.content) for p in message.parts)


PREDICATES: tuple[Callable[[ModelMessage], bool] | None, ...] = (None, _texts, _fix_requests)


def problems(messages: list[ModelMessage]) -> Counter[tuple[str, str | None]]:
    return Counter((p.kind, p.tool_call_id) for p in validate_history(messages))


def last_prompt(messages: list[ModelMessage]) -> list[UserPromptPart]:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            prompts = [p for p in message.parts if isinstance(p, UserPromptPart)]
            if prompts:
                return prompts
    return []


@st.composite
def pinned_histories(draw: Any) -> tuple[list[ModelMessage], set[str], Any]:
    messages = draw(histories(max_turns=6))
    ids = sorted({mid for m in messages if (mid := get_message_id(m)) and not is_summary_message(m)})
    pins = draw(st.sets(st.sampled_from(ids))) if ids else set()
    return messages, pins, draw(st.sampled_from(PREDICATES))


def check(
    messages: list[ModelMessage], out: list[ModelMessage], pins: set[str], predicate: Any, events: list[ContextEvent]
) -> None:
    assert not problems(out) - problems(messages)  # the output validates: no new problem
    assert len(out) <= len(messages) + 1  # never more messages than the input and a summary
    latest = last_prompt(messages)
    assert last_prompt(out)[-len(latest) :] == latest  # the latest request is still the last user prompt
    completed = [e for e in events if isinstance(e, CompactionCompleted)]
    if not completed:
        return
    kept_parts = {id(p) for m in out for p in m.parts}
    missing: list[str | None] = []
    for i, message in enumerate(messages):
        pinned = get_message_id(message) in pins or (predicate is not None and predicate(message))
        if not pinned or is_summary_message(message):
            continue
        parts = [p for p in message.parts if not (i == 0 and isinstance(p, SystemPromptPart))]
        if not all(id(p) in kept_parts for p in parts):
            missing.append(get_message_id(message))
    # A pinned message is left to the summary only when the budget is spent, or when it is an exchange holding an
    # older user prompt (while the latest request moves after the summary); the event says which.
    (event,) = completed
    dropped = [item for item in event.preserved_dropped if item.kind == "pinned"]
    assert {mid for mid in missing if mid} <= {mid for item in dropped for mid in item.message_ids}
    assert missing.count(None) <= sum(item.messages for item in dropped if not item.message_ids)


@examples(400)
@given(pinned_histories(), keeps())
def test_summarization_keeps_pins_and_validates(drawn: Any, keep: Any) -> None:
    messages, pins, predicate = drawn
    events: list[ContextEvent] = []
    processor = SummarizationProcessor(
        None,
        trigger=("messages", 10_000),
        keep=keep,
        max_tokens=20_000,
        working_set_tokens=10**9,
        pin_predicate=predicate,
        event_callback=events.append,
    )
    for pin in pins:
        processor.pin(pin)
    out = asyncio.run(processor.compact(messages))
    check(messages, out, pins, predicate, events)


@examples(200)
@given(pinned_histories(), keeps(), st.integers(0, 3_000))
def test_middleware_keeps_pins_within_budget_and_validates(drawn: Any, keep: Any, budget: int) -> None:
    messages, pins, predicate = drawn
    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(
        max_tokens=20_000,
        keep=keep,
        summarization_model=None,
        working_set_tokens=budget,
        pin_predicate=predicate,
        event_callback=events.append,
    )
    for pin in pins:
        middleware.pin(pin)
    out = asyncio.run(middleware.compact(messages))
    check(messages, out, pins, predicate, events)
    for event in events:
        if isinstance(event, CompactionCompleted):
            moved = [i for i in event.preserved if i.moved and i.kind != "latest_request"]
            assert sum(i.tokens for i in moved) <= budget  # the budget bounds what the working set adds
