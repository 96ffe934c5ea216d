"""Property tests: `keep_user_messages` keeps user turns verbatim through compaction without ever breaking the
history: the output passes `validate_history`, the kept turns are the newest that fit their budget (each turn
whole, in order), a generous budget keeps every turn, and a second compaction keeps them again."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pydantic_ai.models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from strategies import histories

from summarization_pydantic_ai import (
    CompactionCompleted,
    ContextEvent,
    SlidingWindowProcessor,
    SummarizationProcessor,
    validate_history,
)
from summarization_pydantic_ai._user_messages import is_user_turn

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))
EXAMPLES = settings(max_examples=int(300 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def prompt_parts(messages: list[ModelMessage]) -> list[UserPromptPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)]


def turn_parts(messages: list[ModelMessage]) -> list[int]:
    """The prompt parts of the pure user turns (requests of user prompts), in order, by identity: a turn kept
    verbatim is the very same part objects in the output."""
    return [id(p) for m in messages if is_user_turn(m) for p in m.parts if isinstance(p, UserPromptPart)]


def kept_turns(messages: list[ModelMessage], turns: list[int]) -> list[int]:
    return [i for i in map(id, prompt_parts(messages)) if i in turns]


@EXAMPLES
@given(histories(max_turns=6), st.integers(0, 3_000), st.integers(0, 6), st.booleans())
def test_kept_user_turns_are_verbatim_newest_first_and_within_budget(
    messages: list[ModelMessage], budget: int, keep: int, window: bool
) -> None:
    events: list[ContextEvent] = []
    settings_: dict[str, Any] = {"trigger": ("messages", 8), "keep": keep, "keep_user_messages": budget}
    processor = (
        SlidingWindowProcessor(**settings_, event_callback=events.append)
        if window
        else SummarizationProcessor(None, **settings_, event_callback=events.append)
    )
    out = asyncio.run(processor(messages))
    assert validate_history(out) == []
    completed = [e for e in events if isinstance(e, CompactionCompleted)]
    kept = [p for e in completed for p in e.preserved if p.kind == "user_message"]
    assert sum(p.tokens for p in kept if p.moved) <= budget
    # The user turns the output holds are the input's, verbatim, in the input's order (other working-set entries,
    # such as the last tool exchange, follow the summary's user turn whatever their age).
    turns = turn_parts(messages)
    it = iter(turns)
    assert all(any(p == q for q in it) for p in kept_turns(out, turns))
    assert prompt_parts(out)[-1:] == prompt_parts(messages)[-1:]  # the latest request stays last


@EXAMPLES
@given(histories(max_turns=6))
def test_a_generous_budget_keeps_every_user_turn_across_compactions(messages: list[ModelMessage]) -> None:
    """Every turn is kept, unless the turns would be all the compaction replaces: then it summarizes them (and
    says so in `preserved_dropped`) rather than not shrink the context at all."""
    events: list[ContextEvent] = []
    processor = SummarizationProcessor(
        None, trigger=("messages", 2), keep=0, keep_user_messages=1_000_000, event_callback=events.append
    )
    expected = turn_parts(messages)
    current = messages
    for _ in range(2):
        events.clear()
        current = asyncio.run(processor([*current]))
        assert validate_history(current) == []
        dropped = [p for e in events if isinstance(e, CompactionCompleted) for p in e.preserved_dropped]
        if any(p.kind == "user_message" for p in dropped):
            return
        assert kept_turns(current, expected) == expected
