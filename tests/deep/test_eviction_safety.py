"""Eviction never points at the wrong bytes, never deletes what a preview needs, and leaves media to the model."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
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

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.backends import BackendProtocol, LocalBackend, StateBackend
from pydantic_deep.eviction import EVICTION_METADATA_KEY, EvictionProcessor, RetentionPolicy
from summarization_pydantic_ai import JsonHistoryStore


def _output(session: str, n: int, size: int = 100_000) -> str:
    line = f"session {session} call {n}: " + "abcdefghij" * 6 + "\n"
    return (line * (size // len(line) + 1))[:size]


def _previews(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and EVICTION_METADATA_KEY in (p.metadata or {})
    ]


def _path(part: ToolReturnPart) -> str:
    return str(part.metadata[EVICTION_METADATA_KEY]["path"])  # type: ignore[index]


def _parallel_agent(session: str, calls: int, processor: EvictionProcessor) -> Agent[None, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:  # the same call ids in every session, as providers may reuse them
            return ModelResponse(
                parts=[ToolCallPart("produce", {"n": n}, tool_call_id=f"call_{n}") for n in range(calls)]
            )
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[processor])

    @agent.tool_plain
    async def produce(n: int) -> str:
        await asyncio.sleep(0.001 * (calls - n))  # finish in another order than called
        return _output(session, n)

    return agent


@pytest.fixture(params=["state", "local"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> BackendProtocol:
    return StateBackend() if request.param == "state" else LocalBackend(tmp_path / "shared")


async def test_parallel_calls_in_concurrent_sessions_each_read_back_their_own_output(backend: BackendProtocol) -> None:
    processor = EvictionProcessor(token_limit=1_000, backend=backend)
    sessions = ["a", "b", "c"]
    results = await asyncio.gather(*(_parallel_agent(s, 6, processor).run("go") for s in sessions))
    for session, result in zip(sessions, results, strict=True):
        previews = _previews(result.all_messages())
        assert len(previews) == 6
        for part in previews:
            n = int(part.tool_call_id.removeprefix("call_"))
            assert await backend.read(_path(part)) == _output(session, n)


async def test_retention_never_deletes_a_file_a_preview_still_points_to(backend: BackendProtocol) -> None:
    outputs = [_output("x", 1), _output("x", 1), _output("x", 2), _output("x", 3)]  # the first two deduplicated

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < len(outputs):
            return ModelResponse(parts=[ToolCallPart("produce", {"i": step}, tool_call_id=f"c{step}")])
        return ModelResponse(parts=[TextPart("done")])

    processor = EvictionProcessor(token_limit=1_000, backend=backend, retention=RetentionPolicy(max_files=1))
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[processor])

    @agent.tool_plain
    def produce(i: int) -> str:
        return outputs[i]

    result = await agent.run("go")
    previews = _previews(result.all_messages())
    assert len(previews) == 4 and len({_path(p) for p in previews}) == 3
    for part, expected in zip(previews, outputs, strict=True):
        assert await backend.read(_path(part)) == expected
    removed = await processor.cleanup(backend)  # outside the run, without the history: now it may delete
    assert len(removed) == 2


async def test_an_output_over_max_bytes_is_kept_not_written_and_deleted(backend: BackendProtocol) -> None:
    processor = EvictionProcessor(token_limit=1_000, backend=backend, retention=RetentionPolicy(max_bytes=10))
    result = await _parallel_agent("big", 1, processor).run("go")
    (part,) = _previews(result.all_messages())
    assert await backend.read(_path(part)) == _output("big", 0)


async def test_large_raw_bytes_are_evicted_byte_exact(tmp_path: Path) -> None:
    data = bytes(range(256)) * 800 + "é".encode("latin-1") * 1_000  # not UTF-8
    backend = LocalBackend(tmp_path / "ws")

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("dump", {}, tool_call_id="d1")])
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[EvictionProcessor(backend=backend)])

    @agent.tool_plain
    def dump() -> bytes:
        return data

    result = await agent.run("go")
    (part,) = _previews(result.all_messages())
    on_disk = (tmp_path / "ws" / _path(part).lstrip("/")).read_bytes()
    assert on_disk == data
    ModelMessagesTypeAdapter.dump_json(result.all_messages())  # no lone surrogate reaches the history
    assert "binary data" in str(part.content) or "\ufffd" in str(part.content)


async def test_images_from_tools_reach_the_model_with_the_default_deep_agent(tmp_path: Path) -> None:
    png = BinaryContent(data=b"\x89PNG\r\n\x1a\n" + os.urandom(100_000), media_type="image/png")
    received: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("screenshot", {}, tool_call_id="s1")])
        received.extend(
            c
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            for c in ([p.content] if not isinstance(p.content, list) else p.content)  # type: ignore[union-attr]
            if isinstance(c, BinaryContent)
        )
        return ModelResponse(parts=[TextPart("I see it")])

    agent = create_deep_agent(FunctionModel(model), context_manager=False)

    @agent.tool_plain
    def screenshot() -> BinaryContent:
        return png

    await agent.run("look", deps=DeepAgentDeps(base_dir=tmp_path / "base"))
    assert [c.data for c in received] == [png.data]


async def test_evicted_outputs_read_back_after_resume_with_default_deps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the default base_dir is relative: .pydantic-deep under this directory
    big = _output("resume", 7)
    read_back: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        if returns and returns[0].tool_name == "read_file":
            read_back.append(str(returns[0].content))
            return ModelResponse(parts=[TextPart("read")])
        if returns:
            return ModelResponse(parts=[TextPart("saved")])
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("produce", {}, tool_call_id="p1")])
        (preview,) = _previews(messages)
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": _path(preview), "limit": 3}, tool_call_id="r1")])

    def build() -> Agent[DeepAgentDeps, str]:
        agent = create_deep_agent(FunctionModel(model))

        @agent.tool_plain
        def produce() -> str:
            return big

        return agent

    first = DeepAgentDeps(session_id="resume-me")
    await build().run("make it", deps=first)
    assert first.messages_path is not None
    store = JsonHistoryStore.reader(first.messages_path)
    history = await store.load()
    store.close()
    await build().run("read it back", deps=DeepAgentDeps(session_id="resume-me"), message_history=history)
    assert read_back and big.splitlines()[0] in read_back[0]


async def test_a_preview_whose_file_was_removed_says_so_at_the_next_request() -> None:
    """A loaded history's large output is evicted at the run's first request; when retention then removes its
    file (here an explicit cleanup, as another session's retention would), the next request says so."""
    backend = StateBackend()
    processor = EvictionProcessor(token_limit=1_000, backend=backend, retention=RetentionPolicy(max_files=0))
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("load")]),
        ModelResponse(parts=[ToolCallPart("load", {}, tool_call_id="old")]),
        ModelRequest(parts=[ToolReturnPart("load", _output("old", 1), tool_call_id="old")]),
        ModelResponse(parts=[TextPart("loaded")]),
    ]
    sent: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        (old,) = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart) and p.tool_call_id == "old"]
        sent.append(str(old.content))
        if len(sent) == 1:
            return ModelResponse(parts=[ToolCallPart("tidy", {}, tool_call_id="t1")])
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[processor])

    @agent.tool_plain
    async def tidy() -> str:
        return f"removed {len(await processor.cleanup(backend))}"

    await agent.run("go on", message_history=history)
    assert "saved to /large_tool_results/old_" in sent[0]
    assert "removed by the eviction retention policy" in sent[1]
