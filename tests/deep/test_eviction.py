"""EvictionProcessor: large outputs saved through the backend, previews by structure, nothing lost on failure."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep.backends import LocalBackend, StateBackend
from pydantic_deep.deps import DeepAgentDeps
from pydantic_deep.eviction import (
    EVICTION_METADATA_KEY,
    MCP_POLICY,
    EvictionFailed,
    EvictionPolicy,
    EvictionProcessor,
    OutputArchived,
    OutputEvicted,
    RetentionPolicy,
)
from pydantic_deep.filesystem import FilesystemToolset
from summarization_pydantic_ai import validate_history


def big_json() -> str:
    return json.dumps(
        {"results": [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(6_000)], "page": 1}
    )


def big_log() -> str:
    lines = [f"2026-11-22T10:{i // 60 % 60:02d}:{i % 60:02d} INFO request {i} served in 12ms" for i in range(3_000)]
    lines[1234] = "2026-11-22T10:20:34 ERROR database connection refused (db-7)"
    return "\n".join(lines)


def big_csv() -> str:
    return "id,name,price\n" + "\n".join(f"{i},product {i},{i * 1.5:.2f}" for i in range(4_000))


OUTPUTS = {"json_tool": big_json, "log_tool": big_log, "csv_tool": big_csv}


class Script:
    """Calls each big tool, then pages the first evicted file back with read_file."""

    def __init__(self, call_id: str = "call") -> None:
        self.call_id = call_id
        self.previews: dict[str, str] = {}
        self.read_back: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(
                parts=[ToolCallPart(name, {}, tool_call_id=f"{self.call_id}-{name}") for name in OUTPUTS]
            )
        if returns[0].tool_name in OUTPUTS:
            self.previews = {p.tool_name: str(p.content) for p in returns}
            path = re.search(r"saved to (\S+)\.", self.previews["log_tool"])
            assert path is not None
            return ModelResponse(
                parts=[
                    ToolCallPart("read_file", {"path": path.group(1), "offset": 1230, "limit": 10}, tool_call_id="r")
                ]
            )
        self.read_back.append(str(returns[0].content))
        return ModelResponse(parts=[TextPart("done")])


def make_agent(script: Script, processor: EvictionProcessor) -> Agent[DeepAgentDeps, str]:
    agent = Agent(
        FunctionModel(script), deps_type=DeepAgentDeps, capabilities=[processor], toolsets=[FilesystemToolset()]
    )
    for name, make in OUTPUTS.items():
        agent.tool_plain(name=name)(make)
    return agent


async def test_large_outputs_are_evicted_with_structure_aware_previews() -> None:
    events: list[Any] = []
    script = Script()
    deps = DeepAgentDeps(base_dir=None)
    result = await make_agent(script, EvictionProcessor(token_limit=5_000, event_callback=events.append)).run(
        "go", deps=deps
    )
    assert result.output == "done"
    previews = script.previews
    assert previews["json_tool"].startswith("JSON object") and '"results"' in previews["json_tool"]
    assert "4,000" in previews["csv_tool"] and all(c in previews["csv_tool"] for c in ("id", "name", "price"))
    assert "database connection refused" in previews["log_tool"] and "1235" in previews["log_tool"]
    for name, make in OUTPUTS.items():
        path = re.search(r"saved to (\S+)\.", previews[name])
        assert path is not None
        saved = await deps.backend.read(path.group(1))
        if name == "json_tool":  # one long JSON line is saved indented, so read_file can page it
            assert json.loads(saved) == json.loads(make()) and max(map(len, saved.splitlines())) < 200
        else:
            assert saved == make()  # byte for byte
        assert len(previews[name]) < 3_000
    assert "ERROR database connection refused" in script.read_back[0]  # paged back with read_file
    assert sum(isinstance(e, OutputEvicted) for e in events) == 3
    assert validate_history(result.all_messages(), for_request=False) == []
    evicted = [
        p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart) and p.tool_name in OUTPUTS
    ]
    assert all(EVICTION_METADATA_KEY in (p.metadata or {}) for p in evicted)


async def test_a_2kb_tool_call_id_works_on_disk(tmp_path: Any) -> None:
    script = Script(call_id="x" * 2_048)
    deps = DeepAgentDeps(backend=LocalBackend(tmp_path), base_dir=None)
    await make_agent(script, EvictionProcessor(token_limit=5_000)).run("go", deps=deps)
    files = await deps.backend.ls("/large_tool_results")
    names = [f.path.rsplit("/", 1)[1] for f in files if not f.path.endswith(".index.json")]
    assert len(names) == 3 and all(len(n) < 64 for n in names)


class FailingBackend(StateBackend):
    async def write(self, path: str, content: str) -> None:
        raise OSError("disk full")


async def test_a_failing_backend_write_keeps_the_original_output() -> None:
    events: list[Any] = []
    deps = DeepAgentDeps(backend=FailingBackend(), base_dir=None)
    processor = EvictionProcessor(token_limit=5_000, event_callback=events.append)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart("ok")])
        return ModelResponse(parts=[ToolCallPart("json_tool", {}, tool_call_id="j")])

    agent = Agent(FunctionModel(model), deps_type=DeepAgentDeps, capabilities=[processor])
    agent.tool_plain(name="json_tool")(big_json)
    result = await agent.run("go", deps=deps)
    (tool_return,) = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert tool_return.content == big_json()  # nothing lost
    assert [type(e) for e in events] == [EvictionFailed]  # reported once, not retried on every request
    assert "disk full" in events[0].error


async def test_identical_outputs_are_stored_once() -> None:
    backend = StateBackend()
    processor = EvictionProcessor(token_limit=1_000, backend=backend)
    text = big_log()
    first = await processor.evict_text(backend, text, tool_name="t", tool_call_id="a", policy=EvictionPolicy())
    second = await processor.evict_text(backend, text, tool_name="t", tool_call_id="b", policy=EvictionPolicy())
    assert first is not None and second is not None
    assert first[1]["path"] == second[1]["path"]
    files = [f for f in await backend.ls("/large_tool_results") if not f.path.endswith(".index.json")]
    assert len(files) == 1


async def test_mcp_policy_names_files_by_kind_and_time() -> None:
    backend = StateBackend()
    processor = EvictionProcessor(token_limit=1_000, backend=backend, policies=[MCP_POLICY])
    policy = processor.policy_for("mcp__browser__snapshot")
    evicted = await processor.evict_text(
        backend, big_json(), tool_name="mcp__browser__snapshot", tool_call_id="c", policy=policy
    )
    assert evicted is not None
    assert re.fullmatch(r"/large_tool_results/mcp_json_\d{8}_\d{6}_[0-9a-f]{16}\.json", evicted[1]["path"])
    assert processor.policy_for("grep") == EvictionPolicy()


async def test_retention_removes_exactly_what_it_reports() -> None:
    backend = StateBackend()
    processor = EvictionProcessor(token_limit=100, backend=backend, retention=RetentionPolicy(max_files=3))
    for i in range(6):
        await processor.evict_text(
            backend, f"output {i}\n" * 200, tool_name="t", tool_call_id=f"c{i}", policy=EvictionPolicy()
        )
    remaining = sorted(f.path for f in await backend.ls("/large_tool_results") if not f.path.endswith(".index.json"))
    assert [p.rsplit("_", 1)[0] for p in remaining] == [f"/large_tool_results/c{i}" for i in (3, 4, 5)]
    processor.retention = RetentionPolicy(max_files=1)
    before = set(remaining)
    removed = await processor.cleanup()
    after = {f.path for f in await backend.ls("/large_tool_results") if not f.path.endswith(".index.json")}
    assert set(removed) == before - after and after == {remaining[-1]}


async def test_history_processor_form_evicts_a_loaded_history() -> None:
    backend = StateBackend()
    processor = EvictionProcessor(token_limit=1_000, backend=backend)
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("go")]),
        ModelResponse(parts=[ToolCallPart("csv_tool", {}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("csv_tool", big_csv(), tool_call_id="c1")]),
    ]
    out = await processor(history)
    assert out is not history and validate_history(out) == []
    part = out[2].parts[0]
    path = part.metadata[EVICTION_METADATA_KEY]["path"]  # type: ignore[index]
    assert isinstance(part, ToolReturnPart) and re.fullmatch(r"/large_tool_results/c1_[0-9a-f]{16}", path)
    assert f"saved to {path}" in str(part.content)
    assert await backend.read(path) == big_csv()
    assert await processor(out) is out  # nothing left to evict: the same list


async def test_a_later_request_evicts_an_output_edited_in_place_and_ignores_an_edited_response() -> None:
    from pydantic_deep.eviction._run_state import RunState

    processor = EvictionProcessor(token_limit=1_000, backend=StateBackend())
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("go")]),
        ModelResponse(parts=[ToolCallPart("csv_tool", {}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("csv_tool", "small", tool_call_id="c1")]),
        ModelResponse(parts=[TextPart("ok")]),
        ModelRequest(parts=[UserPromptPart("again")]),
    ]
    run = RunState()
    assert await processor._process(history, run, None) is history  # pyright: ignore[reportPrivateUsage]
    response = history[3]
    assert isinstance(response, ModelResponse)
    response.parts[0] = TextPart("edited answer")  # a response edited in place: nothing in it to evict
    assert await processor._process(history, run, None) is history  # pyright: ignore[reportPrivateUsage]
    returned = history[2].parts[0]
    assert isinstance(returned, ToolReturnPart)
    returned.content = big_csv()  # the same part object, a large output now: visited again at the next request
    out = await processor._process(history, run, None)  # pyright: ignore[reportPrivateUsage]
    part = out[2].parts[0]
    assert isinstance(part, ToolReturnPart) and "saved to /large_tool_results/c1_" in str(part.content)
    assert out[3].parts[0] == TextPart("edited answer") and validate_history(out) == []


async def test_agent_mode_keeps_the_output_once_then_archives_it() -> None:
    events: list[Any] = []
    calls = 0

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        if calls == 1:
            return ModelResponse(parts=[ToolCallPart("csv_tool", {}, tool_call_id="big")])
        if calls <= 5:
            return ModelResponse(parts=[ToolCallPart("noop", {}, tool_call_id=f"n{calls}")])
        return ModelResponse(parts=[TextPart("done")])

    processor = EvictionProcessor(
        token_limit=1_000,
        policies=[EvictionPolicy("csv_*", mode="agent", archive_after_turns=3)],
        event_callback=events.append,
    )
    agent = Agent(FunctionModel(model), deps_type=DeepAgentDeps, capabilities=[processor])
    agent.tool_plain(name="csv_tool")(big_csv)
    agent.tool_plain(name="noop")(lambda: "ok")
    result = await agent.run("go", deps=DeepAgentDeps(base_dir=None))
    (part,) = [
        p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart) and p.tool_call_id == "big"
    ]
    assert "saved to /large_tool_results/big" in str(part.content)
    assert [type(e) for e in events if isinstance(e, OutputArchived)] == [OutputArchived]


def test_bad_settings_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="token_limit"):
        EvictionProcessor(token_limit=0)
    with pytest.raises(PermissionError):
        EvictionProcessor(eviction_path="../outside")
    with pytest.raises(ValueError, match="naming"):
        EvictionPolicy(naming="{unknown}")
    with pytest.raises(ValueError, match="plain file name"):
        EvictionPolicy(naming="a/{id}")
