"""Property tests: the thinning of a planned reduction (`thin_outputs`, `supersede_outputs`) never breaks a
history, never changes its shape or what is not a tool return, never grows it, leaves the latest exchange and
failed calls alone, and is idempotent, whatever the history and its reads, writes and snapshots."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart
from strategies import histories

from summarization_pydantic_ai import count_tokens_approximately, thin_outputs, validate_history

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))
_SETTINGS = settings(max_examples=int(150 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])

_PATHS = st.sampled_from(["a.py", "b.py", "docs/c.md"])
_CALLS = st.one_of(
    st.tuples(st.just("read_file"), _PATHS.map(lambda p: {"path": p})),
    st.tuples(st.just("edit_file"), _PATHS.map(lambda p: {"path": p, "old": "x", "new": "y"})),
    st.tuples(st.just("browser_snapshot"), st.just({})),
    st.tuples(st.just("run_tests"), st.just({})),
)
_CONTENTS = st.one_of(
    st.integers(1, 400).map(lambda n: "\n".join(f"line {i}: value = {i}" for i in range(n))),
    st.integers(1, 300).map(lambda n: "\n".join("PASSED" if i % 50 else f"FAILED test_{i} - error" for i in range(n))),
    st.just("ok"),
)


@st.composite
def read_heavy_histories(draw: Any) -> list[ModelMessage]:
    """A valid history whose tool calls became reads, edits, snapshots and test runs of a few files, with returns
    of any size (the call and its return renamed together, so pairs stay consistent)."""
    messages: list[ModelMessage] = draw(histories())
    names: dict[str, str] = {}
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            parts: list[Any] = []
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    name, args = draw(_CALLS)
                    names[part.tool_call_id] = name
                    parts.append(replace(part, tool_name=name, args=args))
                else:
                    parts.append(part)
            out.append(replace(message, parts=parts))
        elif isinstance(message, ModelRequest):
            request_parts: list[Any] = [
                replace(p, tool_name=names[p.tool_call_id], content=draw(_CONTENTS))
                if isinstance(p, ToolReturnPart) and p.tool_call_id in names
                else p
                for p in message.parts
            ]
            out.append(replace(message, parts=request_parts))
        else:
            out.append(message)
    return out


def _latest_exchange(messages: list[ModelMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ModelResponse) and any(isinstance(p, ToolCallPart) for p in message.parts):
            return i
    return len(messages)


@_SETTINGS
@given(read_heavy_histories(), st.sampled_from([80, 160, 1_200]))
def test_thinning_keeps_a_valid_history_of_the_same_shape_and_never_grows_it(
    messages: list[ModelMessage], max_chars: int
) -> None:
    assert validate_history(messages) == []
    out = thin_outputs(messages, max_chars=max_chars)
    assert validate_history(out) == []
    assert len(out) == len(messages)
    assert count_tokens_approximately(out) <= count_tokens_approximately(messages)
    latest = _latest_exchange(messages)
    for i, (before, after) in enumerate(zip(messages, out, strict=True)):
        assert type(before) is type(after) and len(before.parts) == len(after.parts)
        if i >= latest:
            assert after is before, "the latest exchange is never thinned"
        for p, q in zip(before.parts, after.parts, strict=True):
            if not isinstance(p, ToolReturnPart):
                assert q is p, "only tool returns change"
            else:
                assert isinstance(q, ToolReturnPart) and (q.tool_call_id, q.tool_name) == (p.tool_call_id, p.tool_name)
                assert q is p or p.outcome == "success", "a failed call is never thinned"
    assert thin_outputs(out, max_chars=max_chars) is out, "idempotent"
