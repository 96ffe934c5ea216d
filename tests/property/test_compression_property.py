"""Property tests: `MessageCompressor` never breaks a history, never changes its shape, leaves user prompts as
they are (and the latest tool exchange, with `protect_latest`), is deterministic and idempotent, whatever the
history, the tool outputs and the level; and as a history grows, what an earlier request sent is never rewritten
(the prompt cache reads it back)."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart, UserPromptPart
from strategies import histories

from summarization_pydantic_ai import validate_history
from summarization_pydantic_ai.compression import COMPRESSED_METADATA_KEY, LEVELS, MessageCompressor

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))
_SETTINGS = settings(max_examples=int(150 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _snapshot(n: int) -> str:
    lines = ["- main [ref=e0]:"]
    for i in range(n):
        lines += [
            f"  - generic [ref=e{i}a]:",
            f"    - generic [ref=e{i}b]:",
            f'      - heading "Item {i}" [level=2] [ref=e{i}c]',
            f"      - paragraph [ref=e{i}d]: costs {i} EUR",
            f'      - button "Buy {i}" [ref=e{i}e] [cursor=pointer]',
        ]
    return "\n".join(lines)


def _log(n: int) -> str:
    lines = [f"[LOG] tick {i}" if i % 97 else f"[ERROR] failure {i}" for i in range(n)]
    return "$ npm start\n" + "\n".join(lines)


def _json(n: int) -> str:
    return json.dumps({"items": [{"id": i, "name": f"n{i}", "tags": ["a"] * (i % 4)} for i in range(n)]})


_CONTENTS = st.one_of(
    st.builds(_snapshot, st.integers(1, 400)),
    st.builds(_log, st.integers(1, 3_000)),
    st.builds(_json, st.integers(1, 2_000)),
    st.builds(lambda n: "word " * n, st.integers(1, 20_000)),
)
_TOOLS = st.sampled_from(["browser_snapshot", "take_snapshot", "bash", "browser_console_messages", "fetch", "grep"])


@st.composite
def tool_heavy_histories(draw: Any) -> list[ModelMessage]:
    """A valid history whose tool returns were swapped for snapshots, logs, JSON and text of any size, under
    tool names that route them (the call's name is changed with its return's, so pairs stay consistent)."""
    messages: list[ModelMessage] = draw(histories())
    names: dict[str, str] = {}
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            response_parts = []
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    names[part.tool_call_id] = draw(_TOOLS)
                    response_parts.append(replace(part, tool_name=names[part.tool_call_id]))
                else:
                    response_parts.append(part)
            out.append(replace(message, parts=response_parts))
        elif isinstance(message, ModelRequest):
            request_parts = []
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.tool_call_id in names:
                    content = draw(_CONTENTS) if draw(st.booleans()) else part.content
                    request_parts.append(replace(part, tool_name=names[part.tool_call_id], content=content))
                else:
                    request_parts.append(part)
            out.append(replace(message, parts=request_parts))
        else:
            out.append(message)
    return out


def _latest_exchange_start(messages: list[ModelMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ModelResponse) and any(isinstance(p, ToolCallPart) for p in message.parts):
            return i
    return len(messages) - 1


@_SETTINGS
@given(tool_heavy_histories(), st.sampled_from(list(LEVELS)), st.sampled_from([None, 1, 2, 3]), st.booleans())
def test_compressed_histories_validate_and_compressing_is_idempotent(
    messages: list[ModelMessage], level: Any, depth: int | None, protect_latest: bool
) -> None:
    assert validate_history(messages) == []
    compressor = MessageCompressor(level=level, snapshot_depth=depth, protect_latest=protect_latest)
    out = asyncio.run(compressor(messages))
    assert validate_history(out) == []
    assert len(out) == len(messages)
    latest = _latest_exchange_start(messages)
    for i, (before, after) in enumerate(zip(messages, out, strict=True)):
        assert type(before) is type(after) and len(before.parts) == len(after.parts)
        if i >= latest and protect_latest:
            assert after is before  # the latest tool exchange, as it was
        for p, q in zip(before.parts, after.parts, strict=True):
            if isinstance(p, UserPromptPart) or not isinstance(p, ToolReturnPart):
                assert q is p  # user prompts, calls, text: untouched
            else:
                assert isinstance(q, ToolReturnPart) and q.tool_call_id == p.tool_call_id
                if q is not p:
                    mark = q.metadata[COMPRESSED_METADATA_KEY]  # type: ignore[index]
                    assert mark["chars_after"] == len(q.content) < mark["chars_before"]
    assert asyncio.run(compressor(out)) is out  # idempotent, from the cache
    fresh = asyncio.run(MessageCompressor(level=level, snapshot_depth=depth, protect_latest=protect_latest)(out))
    assert [m.parts for m in fresh] == [m.parts for m in out]  # idempotent, from scratch
    again = asyncio.run(MessageCompressor(level=level, snapshot_depth=depth, protect_latest=protect_latest)(messages))
    assert [m.parts for m in again] == [m.parts for m in out]  # deterministic


@_SETTINGS
@given(tool_heavy_histories(), st.sampled_from(list(LEVELS)))
def test_a_growing_history_never_rewrites_what_an_earlier_request_sent(
    messages: list[ModelMessage], level: Any
) -> None:
    """Fed request by request as a run does (each output written back), every request starts with exactly what
    the previous one sent: the compression happens as an output enters, never later."""
    compressor = MessageCompressor(level=level)
    sent: list[ModelMessage] = []
    start = 0
    for end in range(1, len(messages) + 1):
        if not isinstance(messages[end - 1], ModelRequest):
            continue
        request = asyncio.run(compressor([*sent, *messages[start:end]]))
        assert request[: len(sent)] == sent
        sent, start = request, end
    assert validate_history(sent) == []
