"""Property tests: clamping oversized parts never breaks a history. Whatever the limit, the output passes
`validate_history`, keeps every message and part in place (kinds, tool call ids, system prompts and summaries),
leaves the input untouched, shrinks each part it cuts, and clamping again changes nothing."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pydantic_ai.models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    SystemPromptPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
)
from strategies import histories

from summarization_pydantic_ai import ClampOversizedParts, ContextEvent, PartsClamped, validate_history

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))
EXAMPLES = settings(max_examples=int(300 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def limits(draw: Any) -> tuple[int, int]:
    limit = draw(st.integers(65, 600))
    return limit, draw(st.integers(64, limit - 1))


def dump(messages: list[ModelMessage]) -> str:
    return json.dumps(ModelMessagesTypeAdapter.dump_python(messages, mode="json"))


def ids(messages: list[ModelMessage]) -> list[list[str | None]]:
    return [[getattr(p, "tool_call_id", None) for p in m.parts] for m in messages]


@EXAMPLES
@given(st.booleans().flatmap(lambda r: st.tuples(st.just(r), histories(for_request=r))), limits())
def test_clamped_histories_stay_valid_and_in_place(
    case: tuple[bool, list[ModelMessage]], sizes: tuple[int, int]
) -> None:
    for_request, messages = case
    limit, keep = sizes
    before = dump(messages)
    events: list[ContextEvent] = []
    clamp = ClampOversizedParts(max_part_tokens=limit, clamp_to_tokens=keep, event_callback=events.append)
    out = asyncio.run(clamp(messages))
    assert dump(messages) == before
    assert validate_history(out, for_request=for_request) == []
    assert [[type(p) for p in m.parts] for m in out] == [[type(p) for p in m.parts] for m in messages]
    assert ids(out) == ids(messages)
    for old, new in zip(messages, out, strict=True):
        for p_old, p_new in zip(old.parts, new.parts, strict=True):
            if isinstance(p_old, SystemPromptPart | CompactionPart | ThinkingPart):
                assert p_new is p_old
            if isinstance(p_old, ToolCallPart) and isinstance(p_old.args, dict):
                assert isinstance(p_new, ToolCallPart) and isinstance(p_new.args, dict)  # still a JSON object
    clamped = [c for e in events if isinstance(e, PartsClamped) for c in e.parts]
    for c in clamped:
        assert c.tokens_after < c.tokens_before
        assert c.tokens_after <= 2 * keep + 64
        assert isinstance(out[c.message_index], ModelRequest) == (
            c.kind in ("user_prompt", "tool_return", "retry_prompt")
        )
    changed = {i for i, (a, b) in enumerate(zip(messages, out, strict=True)) if a is not b}
    assert changed == {c.message_index for c in clamped}
    again = asyncio.run(ClampOversizedParts(max_part_tokens=limit, clamp_to_tokens=keep)(out))
    assert dump(again) == dump(out)
    returns = [p for m in out for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(returns) == sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
