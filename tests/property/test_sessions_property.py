"""Property: a history cut at any message id (`history_until`, `fork`) is a valid history, or refused with
`ForkPointError` when the cut would split tool calls from their results."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pydantic_ai.models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
)
from strategies import histories

from pydantic_deep import ForkPointError, SessionManager
from summarization_pydantic_ai import (
    JsonHistoryStore,
    ensure_message_id,
    get_message_id,
    is_summary_message,
    validate_history,
)

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))


def has_user_turn(messages: list[ModelMessage]) -> bool:
    return any(
        isinstance(m, ModelRequest) and any(not isinstance(p, SystemPromptPart | CompactionPart) for p in m.parts)
        for m in messages
    )


def record(base: Path, messages: list[ModelMessage]) -> SessionManager:
    sessions = SessionManager(base)
    info = sessions.create("s")
    for message in messages:
        ensure_message_id(message)
    store = JsonHistoryStore(info.messages_path)
    store.append_sync(messages)
    store.close()
    return sessions


@settings(max_examples=int(100 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=histories(for_request=False, summaries=True), data=st.data())
def test_a_cut_at_any_message_is_valid_or_refused(
    tmp_path: Path, messages: list[ModelMessage], data: st.DataObject
) -> None:
    sessions = record(tmp_path / uuid.uuid4().hex, messages)
    at = data.draw(st.integers(0, len(messages) - 1), label="cut index")
    point = get_message_id(messages[at])
    assert point is not None

    async def cut() -> tuple[list[ModelMessage], list[ModelMessage]]:
        history = await sessions.history_until("s", point)
        fork = await sessions.fork("s", point)
        return history, await sessions.resume(fork.id)

    message = messages[at]
    splits_exchange = isinstance(message, ModelResponse) and any(isinstance(p, ToolCallPart) for p in message.parts)
    try:
        history, forked = asyncio.run(cut())
    except ForkPointError:
        assert splits_exchange or not has_user_turn(messages[: at + 1])
        assert [s.id for s in sessions.list()] == ["s"], "a refused fork leaves nothing behind"
        return
    assert not splits_exchange
    assert validate_history(history, for_request=False) == []
    assert get_message_id(history[-1]) == point
    assert [get_message_id(m) for m in forked] == [get_message_id(m) for m in history]
    if not any(is_summary_message(m) for m in messages[: at + 1]):
        assert [get_message_id(m) for m in history] == [get_message_id(m) for m in messages[: at + 1]]
