"""End-to-end: what the middleware records, as a new user meets it (run_stream, edits, the lock, warnings)."""

from __future__ import annotations

import copy
import logging
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    HistoryStoreError,
    HistoryStoreLockedError,
    JsonHistoryStore,
    _windows,
    ensure_message_id,
    get_message_id,
)
from summarization_pydantic_ai.context_manager import _counting


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])


async def stream_answer(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    yield "streamed "
    yield f"answer {len(messages)}"


def records(path: Path) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_json(path.read_bytes())


async def test_run_stream_then_run_records_the_final_answer_once(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(max_tokens=100_000, summarization_model=None, messages_path=path)
    agent = Agent(FunctionModel(answer, stream_function=stream_answer), capabilities=[middleware])

    async with agent.run_stream("first") as streamed:
        assert await streamed.get_output() == "streamed answer 1"
    history = streamed.all_messages()
    result = await agent.run("second", message_history=history)
    async with agent.run_stream("third", message_history=result.all_messages()) as streamed:
        await streamed.get_output()
    await agent.run("fourth", message_history=streamed.all_messages())

    saved = records(path)
    texts = [p.content for m in saved for p in m.parts if isinstance(p, TextPart | UserPromptPart)]
    assert texts == [
        "first",
        "streamed answer 1",
        "second",
        "answer 3",
        "third",
        "streamed answer 5",
        "fourth",
        "answer 7",
    ]
    assert len({get_message_id(m) for m in saved}) == len(saved) == 8


class SpyStore:
    """A `HistoryStore` that keeps what `append` was handed (every call), latest version per id."""

    def __init__(self) -> None:
        self.appended: list[list[ModelMessage]] = []
        self.latest: dict[str, ModelMessage] = {}

    path = None

    async def append(self, messages: Sequence[ModelMessage]) -> int:
        self.appended.append(list(messages))
        for message in messages:  # a copy, as a real store keeps its own bytes
            self.latest[get_message_id(message) or ""] = copy.deepcopy(message)
        return len(messages)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self.latest

    async def load(self) -> list[ModelMessage]:
        return list(self.latest.values())

    async def load_all(self) -> list[ModelMessage]:
        return list(self.latest.values())

    async def read(self, start_id: str | None, end_id: str | None, *, offset: int = 0, limit: int = 50) -> Any:
        from summarization_pydantic_ai import HistoryPage

        message = self.latest.get(start_id or "")
        return HistoryPage([message] if message else [], 1 if message else 0, offset, None)

    def size_bytes(self) -> int:
        return 0

    def __len__(self) -> int:
        return len(self.latest)


def _conversation() -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart("Read the log")]),
        ModelResponse(parts=[ToolCallPart("read", {"path": "log"}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("read", "line\n" * 500, tool_call_id="c1")]),
        ModelResponse(parts=[TextPart("The log is fine.")]),
        ModelRequest(parts=[UserPromptPart("Thanks")]),
    ]


async def test_a_message_edited_in_place_is_recorded_again() -> None:
    store = SpyStore()
    middleware = ContextManagerMiddleware(max_tokens=100_000, summarization_model=None, history_store=store)
    history = _conversation()
    await middleware(history)
    assert [len(batch) for batch in store.appended] == [5]

    first = history[0]
    assert isinstance(first, ModelRequest)
    history[0] = replace(first, parts=[UserPromptPart("Read the log (redacted)")])  # same id, new content
    await middleware(history)
    assert len(store.appended) == 2 and store.appended[1] == [history[0]]
    assert get_message_id(history[0]) == get_message_id(first)

    history[3].parts[0] = TextPart("The log shows one error.")  # the same object, mutated
    await middleware(history)
    assert len(store.appended) == 3 and store.appended[2] == [history[3]]

    await middleware(history)  # nothing changed: nothing handed to the store
    assert len(store.appended) == 3


async def test_clearing_or_evicting_a_tool_result_is_not_a_new_version() -> None:
    store = SpyStore()
    middleware = ContextManagerMiddleware(max_tokens=100_000, summarization_model=None, history_store=store)
    history = _conversation()
    await middleware(history)
    request = history[2]
    assert isinstance(request, ModelRequest)
    part = request.parts[0]
    assert isinstance(part, ToolReturnPart)
    preview = replace(part, content="[evicted: 2,500 bytes]", metadata={"pydantic_deep.eviction": {"path": "x"}})
    history[2] = replace(request, parts=[preview])
    await middleware(history)
    assert len(store.appended) == 1  # the recorded original stays the latest version: read_history returns it


async def test_an_edited_message_is_loaded_in_its_latest_version(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(max_tokens=100_000, summarization_model=None, messages_path=path)
    history = _conversation()
    await middleware(history)
    history[0] = replace(history[0], parts=[UserPromptPart("Read the log (redacted)")])
    await middleware(history)
    store = JsonHistoryStore.open(path)
    loaded = await store.load()
    assert [get_message_id(m) for m in loaded] == [get_message_id(m) for m in history]
    assert loaded[0].parts[0].content == "Read the log (redacted)"  # type: ignore[union-attr]
    assert len(path.read_bytes().splitlines()) > 5 + 2  # the file keeps both versions


_HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys, time
    with open(sys.argv[1], "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)


async def test_lock_timeout_is_a_middleware_setting_and_waits_for_the_other_writer(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"  # the store locks the data file itself
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), "1.0"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        impatient = ContextManagerMiddleware(max_tokens=100_000, summarization_model=None, messages_path=path)
        with pytest.raises(HistoryStoreLockedError, match="lock_timeout"):
            await impatient(_conversation())
        impatient.store.close()  # type: ignore[union-attr]
        patient = ContextManagerMiddleware(
            max_tokens=100_000, summarization_model=None, messages_path=path, lock_timeout=10
        )
        started = time.monotonic()
        await patient(_conversation())
        assert time.monotonic() - started < 10
        assert len(records(path)) == 5
        patient.store.close()  # type: ignore[union-attr]
    finally:
        holder.wait(timeout=10)
    with pytest.raises(ValueError, match="lock_timeout"):
        ContextManagerMiddleware(lock_timeout=-1)


@pytest.mark.parametrize("model", ["test", "function"])
async def test_scripted_models_log_no_window_warning(
    model: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_windows, "_warned", set[str]())  # as in a fresh process
    monkeypatch.setattr(_counting, "_defaulted", set[str]())
    scripted = TestModel() if model == "test" else FunctionModel(answer)
    agent = Agent(scripted, capabilities=[ContextManagerMiddleware(summarization_model=None)])
    with caplog.at_level(logging.WARNING):
        await agent.run("hello")
        await agent.run("again")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_an_unknown_real_model_is_reported_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_windows, "_warned", set[str]())
    monkeypatch.setattr(_counting, "_defaulted", set[str]())
    middleware = ContextManagerMiddleware(summarization_model=None, model_name="acme:unreleased-model")
    message = ModelRequest(parts=[UserPromptPart("hi")])
    ensure_message_id(message)
    with caplog.at_level(logging.WARNING):
        await middleware([message])
        await middleware([message])
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "acme:unreleased-model" in warnings[0]


async def test_a_second_chat_on_the_same_file_is_refused_not_merged(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(max_tokens=100_000, summarization_model=None, messages_path=path)
    agent = Agent(FunctionModel(answer), capabilities=[middleware])
    first = await agent.run("chat one")
    before = path.read_bytes()

    with pytest.raises(HistoryStoreError, match=r"another conversation .*message_history=.*shared_file=True"):
        await agent.run("chat two")  # a new conversation on a file that holds one
    assert path.read_bytes() == before  # nothing of it was written

    store = JsonHistoryStore.open(path)
    resumed = await agent.run("chat one, continued", message_history=await store.load())
    assert resumed.output == "answer 3"
    again = await agent.run("and more", message_history=first.all_messages())  # any recorded history continues
    assert again.output == "answer 3"

    shared = ContextManagerMiddleware(
        max_tokens=100_000, summarization_model=None, messages_path=path, shared_file=True
    )
    await Agent(FunctionModel(answer), capabilities=[shared]).run("chat two, on purpose")
    prompts = [p.content for m in records(path) for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts == ["chat one", "chat one, continued", "and more", "chat two, on purpose"]
