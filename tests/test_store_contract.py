"""The reader contract (`read_records`) and session-id validation shared by the store and its consumers."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from summarization_pydantic_ai import (
    InvalidSessionIdError,
    JsonHistoryStore,
    ensure_message_id,
    read_records,
    validate_session_id,
)


def _messages(n: int) -> list[ModelRequest | ModelResponse]:
    out: list[ModelRequest | ModelResponse] = []
    for i in range(n):
        message = ModelRequest(parts=[UserPromptPart(f"q{i}")]) if i % 2 == 0 else ModelResponse([TextPart(f"a{i}")])
        ensure_message_id(message)
        out.append(message)
    return out


def test_read_records_follows_appends(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    assert read_records(path).records == []
    store = JsonHistoryStore(path)
    first = _messages(3)
    store.append_sync(first)
    batch = read_records(path)
    assert [r.message_id for r in batch.records] == [m.metadata["summarization_pydantic_ai.message_id"] for m in first]  # type: ignore[index]
    assert batch.first_message_id == batch.records[0].message_id
    more = _messages(2)
    store.append_sync(more)
    later = read_records(path, batch.next_offset)
    assert [r.message.parts[0] for r in later.records] == [m.parts[0] for m in more]
    assert read_records(path, later.next_offset).records == []
    store.close()


@pytest.mark.parametrize("good", ["s1", "2026-11-25_chat", "a.b", "é" * 127, "x" * 255])
def test_valid_session_ids(good: str) -> None:
    assert validate_session_id(good) == good


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "../x", "a\\b", "a\x00b", "tab\there", "x" * 256, "é" * 128, 7])
def test_invalid_session_ids_are_refused_with_the_reason(bad: object) -> None:
    with pytest.raises(InvalidSessionIdError) as info:
        validate_session_id(bad)
    assert isinstance(info.value, ValueError)
    assert "session id" in str(info.value)
