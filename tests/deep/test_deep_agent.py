"""End-to-end: `create_deep_agent` with a scripted model, big outputs, todos and a forced compaction."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.agent import _BindContextManager  # pyright: ignore[reportPrivateUsage]
from pydantic_deep.eviction import EvictionProcessor
from pydantic_deep.patch import PatchToolCalls
from pydantic_deep.todos import TodoCapability
from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    SlidingWindowProcessor,
    is_summary_message,
    render_messages,
    validate_history,
)


class Task:
    """Plans with todos, fetches three big reports, writes a summary file, finishes."""

    def __init__(self) -> None:
        self.step = 0
        self.instructions: list[str] = []
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.step += 1
        self.instructions.append(info.instructions or "")
        self.seen.append(list(messages))
        todos = [
            {"content": "fetch the three reports", "status": "in_progress"},
            {"content": "write summary.md", "status": "pending"},
        ]
        plan: list[Any] = [
            ToolCallPart("write_todos", {"todos": todos}),
            ToolCallPart("fetch_report", {"n": 1}),
            ToolCallPart("fetch_report", {"n": 2}),
            ToolCallPart("fetch_report", {"n": 3}),
            ToolCallPart("write_file", {"path": "/summary.md", "content": "# Summary\nthree reports fetched\n"}),
        ]
        if self.step <= len(plan):
            return ModelResponse(parts=[plan[self.step - 1]])
        return ModelResponse(parts=[TextPart("all done")])


def fetch_report(n: int) -> str:
    return json.dumps({"report": n, "rows": [{"i": i, "value": f"r{n}-{i}"} for i in range(3_000)]})


async def test_a_multi_step_task_with_big_outputs(tmp_path: Path) -> None:
    task = Task()
    middleware = ContextManagerMiddleware(
        summarization_model=None, max_tokens=200_000, messages_path=lambda ctx: ctx.deps.messages_path
    )
    agent = create_deep_agent(
        FunctionModel(task), context_manager=middleware, eviction=EvictionProcessor(token_limit=5_000)
    )
    agent.tool_plain(fetch_report)
    deps = DeepAgentDeps(base_dir=tmp_path / ".pydantic-deep", session_id="task1")
    result = await agent.run("Fetch the reports and summarize them.", deps=deps)
    assert result.output == "all done"
    history = result.all_messages()
    assert validate_history(history, for_request=False) == []
    files = [f.path for f in await deps.backend.ls("/large_tool_results") if not f.path.endswith(".index.json")]
    assert len(files) == 3
    for path in files:
        assert json.loads(await deps.backend.read(path))["rows"][2999]["i"] == 2999
    assert await deps.backend.read("/summary.md") == "# Summary\nthree reports fetched\n"
    fetched = [p for m in history for p in m.parts if isinstance(p, ToolReturnPart) and p.tool_name == "fetch_report"]
    assert all(len(str(p.content)) < 3_000 for p in fetched)
    assert [t.content for t in deps.todos] == ["fetch the three reports", "write summary.md"]
    assert "fetch the three reports" in render_messages(task.seen[-1]), "the model sees the current list"
    assert deps.context_manager is middleware
    assert deps.messages_path is not None and deps.messages_path.exists()
    recorded = ModelMessagesTypeAdapter.validate_json(deps.messages_path.read_bytes())
    assert len(recorded) == len(history)


async def test_todos_survive_a_forced_compaction(tmp_path: Path) -> None:
    task = Task()
    agent = create_deep_agent(
        FunctionModel(task),
        context_manager=ContextManagerMiddleware(
            summarization_model=None, messages_path=lambda ctx: ctx.deps.messages_path
        ),
        eviction=EvictionProcessor(token_limit=5_000),
    )
    agent.tool_plain(fetch_report)
    deps = DeepAgentDeps(base_dir=tmp_path, session_id="s")
    first = await agent.run("Fetch the reports.", deps=deps)
    assert deps.context_manager is not None
    deps.context_manager.request_compact(focus="todos")
    task.step = 10  # the model now just answers
    second = await agent.run("Anything left?", deps=deps, message_history=first.all_messages())
    assert any(is_summary_message(m) for m in second.all_messages())
    assert deps.context_manager.compression_count == 1
    assert "fetch the three reports" not in task.instructions[-1], "the instructions never change with the list"
    assert "fetch the three reports" in render_messages(task.seen[-1]), "the todo exchange is kept after compaction"
    assert len(deps.todos) == 2


def test_the_processing_order_is_fixed() -> None:
    user_processor = SlidingWindowProcessor(trigger=("messages", 500), keep=100)
    agent = create_deep_agent("test", capabilities=[user_processor])
    capabilities = list(agent.root_capability.capabilities)  # type: ignore[attr-defined]
    kinds = [type(c) for c in capabilities]
    spine = [
        k for k in kinds if k in (PatchToolCalls, EvictionProcessor, SlidingWindowProcessor, ContextManagerMiddleware)
    ]
    assert spine == [PatchToolCalls, EvictionProcessor, SlidingWindowProcessor, ContextManagerMiddleware]
    assert TodoCapability in kinds and _BindContextManager in kinds


def test_bad_arguments_are_refused_clearly() -> None:
    with pytest.raises(TypeError, match="context_manager must be"):
        create_deep_agent("test", context_manager="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="before eviction"):
        create_deep_agent("test", context_manager=ContextManagerMiddleware(max_tool_output_tokens=500))
    with pytest.raises(ValueError, match="session_id"):
        DeepAgentDeps(session_id="../x")


async def test_deps_with_defaults_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    agent = create_deep_agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("hi")])), context_manager=False)
    result = await agent.run("hello", deps=DeepAgentDeps())
    assert result.output == "hi"


async def test_on_disk_deps_follow_the_session_layout(tmp_path: Path) -> None:
    deps = DeepAgentDeps.on_disk(tmp_path / "workspace", base_dir=tmp_path / ".pydantic-deep", session_id="abc")
    await deps.backend.write("/large_tool_results/call_1", "evicted")
    await deps.backend.write("/src/app.py", "print(1)")
    assert (tmp_path / ".pydantic-deep" / "large_tool_results" / "call_1").read_text() == "evicted"
    assert (tmp_path / "workspace" / "src" / "app.py").read_text() == "print(1)"
    assert deps.messages_path == tmp_path / ".pydantic-deep" / "sessions" / "abc" / "messages.json"
    assert deps.memory_dir == tmp_path / ".pydantic-deep" / "main"


async def test_the_prompt_cache_is_asked_for_unless_turned_off() -> None:
    settings: list[Any] = []

    @dataclass
    class Spy(AbstractCapability[Any]):
        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            settings.append((request_context.model_settings or {}).get("cache"))
            return request_context

    model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("hi")]))
    for caching in (True, False):
        agent = create_deep_agent(model, context_manager=False, prompt_caching=caching, capabilities=[Spy()])
        await agent.run("hello", deps=DeepAgentDeps(base_dir=None))
    assert settings == [True, None]  # pydantic-ai places the breakpoints (instructions and tools, the request's end)
