"""Resuming a messages.json reads the working context only: the resume point beside the file says where it lies,
a point that does not describe the file is never trusted, and a span read by ids reads that span."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from test_store import make_messages

from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    JsonHistoryStore,
    count_tokens_approximately,
    ensure_message_id,
    estimate_message_tokens,
    get_message_id,
    read_records,
    working_context,
)
from summarization_pydantic_ai._messages import SUMMARY_METADATA_KEY
from summarization_pydantic_ai._tokens import _default_counter  # pyright: ignore[reportPrivateUsage]
from summarization_pydantic_ai.store import _checked, _resume
from summarization_pydantic_ai.store._resume import point_path


def _summary(covers: list[ModelMessage], before: list[ModelMessage], after: list[ModelMessage]) -> ModelMessage:
    info: dict[str, Any] = {
        "covers": [get_message_id(m) for m in covers],
        "working_before": [get_message_id(m) for m in before],
        "working_after": [get_message_id(m) for m in after],
    }
    summary = ModelRequest(parts=[CompactionPart(content="summary", metadata={SUMMARY_METADATA_KEY: info})])
    ensure_message_id(summary)
    return summary


def _compacted(path: Path, size: int, tail: int) -> tuple[list[ModelMessage], list[ModelMessage]]:
    """A file of `size` messages, the latest summary `tail` messages from the end (keeping the first message and
    the 4 before it); returns what was recorded and the working context."""
    messages = make_messages(size)
    cut = size - tail
    summary = _summary(messages[max(1, cut - 100) : cut - 4], messages[:1], messages[cut - 4 : cut])
    store = JsonHistoryStore(path)
    for start in range(0, cut, 500):
        store.append_sync(messages[start : min(start + 500, cut)])
    store.append_sync([summary, *messages[cut:]])
    store.close()
    return [*messages[:cut], summary, *messages[cut:]], [messages[0], summary, *messages[cut - 4 :]]


def _dumped(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    read: list[int] = []
    real = os.pread

    def counting(fd: int, length: int, offset: int) -> bytes:
        data = real(fd, length, offset)
        read.append(len(data))
        return data

    for module in (_resume, _checked):
        monkeypatch.setattr(module.os, "pread", counting)
    return read


def test_load_reads_only_from_the_latest_summary_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "messages.json"
    _, working = _compacted(path, 2_000, 20)
    read = _count_reads(monkeypatch)
    monkeypatch.setattr(JsonHistoryStore, "_index", None)  # nothing may index the whole file
    loaded = JsonHistoryStore.reader(path).load_sync()
    assert _dumped(loaded) == _dumped(working)
    assert 0 < sum(read) < path.stat().st_size / 20


def test_damage_before_the_summary_does_not_stop_a_resume(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    _, working = _compacted(path, 200, 10)
    data = bytearray(path.read_bytes())
    data[read_records(path).records[50].offset + 20] ^= 0x01
    path.write_bytes(bytes(data))
    store = JsonHistoryStore(path)
    assert _dumped(store.load_sync()) == _dumped(working) and store.recovered_from is None
    assert len(store) == 200 and store.recovered_from is not None  # indexing every record repairs (1 lost)
    store.close()


@pytest.mark.parametrize("stale", ["older", "torn", "other file", "appended without it"])
def test_a_point_that_does_not_describe_the_file_is_not_used(tmp_path: Path, stale: str) -> None:
    path = tmp_path / "messages.json"
    recorded, _ = _compacted(path, 120, 10)
    point = point_path(path).read_bytes()
    more = make_messages(6, start=500)
    more.insert(2, _summary(recorded[:50], [], recorded[-3:]))
    store = JsonHistoryStore(path)
    store.append_sync(more)
    store.close()
    if stale == "older":  # the point of before the append (a crash between the two writes)
        point_path(path).write_bytes(point)
    elif stale == "torn":
        point_path(path).write_bytes(point_path(path).read_bytes()[:-7])
    elif stale == "other file":  # same length, other bytes: another history put in its place
        data = bytearray(path.read_bytes())
        data[-40] = ord("x") if data[-40] != ord("x") else ord("y")
        path.write_bytes(bytes(data))
    else:  # another program appended a record (a newer version of a covered message) and left the point as it was
        with path.open("r+b") as handle:
            handle.seek(path.stat().st_size - 3)
            edited = ModelMessagesTypeAdapter.dump_json([recorded[3]])[1:-1].replace(b"question 3", b"question 3!")
            handle.write(b",\n" + edited + b"\n]\n")
    expected = [r.message for r in read_records(path).records]
    assert _dumped(JsonHistoryStore.reader(path).load_sync()) == _dumped(working_context(expected))


def test_a_span_read_by_ids_decodes_only_that_span(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "messages.json"
    recorded, _ = _compacted(path, 1_000, 10)
    store = JsonHistoryStore(path)
    assert store.read_sync(limit=1).total == 1_001  # opened and indexed (the index holds offsets, not messages)
    read = _count_reads(monkeypatch)
    decoded: list[int] = []
    real = _checked.decode_lines
    monkeypatch.setattr(
        "summarization_pydantic_ai.store._json_file.decode_lines",
        lambda data, lines, **kw: decoded.append(len(lines)) or real(data, lines, **kw),  # type: ignore[func-returns-value]
    )
    page = store.read_sync(get_message_id(recorded[100]), get_message_id(recorded[119]))
    assert _dumped(page.messages) == _dumped(recorded[100:120]) and page.total == 20
    assert decoded == [20] and sum(read) < path.stat().st_size / 20
    store.close()


def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])


async def test_a_loaded_history_is_measured_once_as_it_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load() measures the messages it decoded (in its worker thread): the first count of the loaded history, and
    the middleware's count when a run resumes it, measure only what is new."""
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(max_tokens=1_000_000, summarization_model=None, messages_path=path)
    agent = Agent(FunctionModel(_answer), capabilities=[middleware])
    result = await agent.run("first question")
    for turn in range(30):
        result = await agent.run(f"question {turn}", message_history=result.all_messages())
    loaded = await JsonHistoryStore.reader(path).load()
    measured: list[int] = []
    real = _default_counter._measure_all  # pyright: ignore[reportPrivateUsage]

    def counting(messages: Sequence[ModelMessage]) -> list[int]:
        measured.append(len(messages))
        return real(messages)

    monkeypatch.setattr(_default_counter, "_measure_all", counting)
    assert count_tokens_approximately(loaded) == sum(estimate_message_tokens(m) for m in loaded)
    assert measured == []  # measured by load()
    resumed = Agent(
        FunctionModel(_answer),
        capabilities=[ContextManagerMiddleware(max_tokens=1_000_000, summarization_model=None, messages_path=path)],
    )
    await resumed.run("one more", message_history=loaded)
    assert 0 < sum(measured) <= 4  # the new prompt and the answer, not the 62 loaded messages
