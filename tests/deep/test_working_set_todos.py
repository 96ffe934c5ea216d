"""The harness's todo list is part of the working set: after a compaction the model still sees the latest
`write_todos` call and its result verbatim (besides the list in the instructions)."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep import DeepAgentDeps, create_deep_agent
from summarization_pydantic_ai import DEFAULT_TODO_TOOLS, ContextManagerMiddleware, is_summary_message

TODOS = [{"content": "read the logs", "status": "in_progress"}, {"content": "write the report", "status": "pending"}]


class Planner:
    """Writes the todo list, lists the files four times, answers; records what it was sent."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []
        self.step = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.step += 1
        step = self.step
        if step == 1:
            return ModelResponse(parts=[ToolCallPart("write_todos", {"todos": TODOS}, "todo-1")])
        if step <= 5:
            return ModelResponse(parts=[ToolCallPart("ls", {"path": "/"}, f"ls-{step}")])
        return ModelResponse(parts=[TextPart("done")])


async def test_the_todo_exchange_survives_a_compaction_verbatim(tmp_path: Path) -> None:
    assert DEFAULT_TODO_TOOLS == ("write_todos",)  # the harness's todo tool
    middleware = ContextManagerMiddleware(summarization_model=None, messages_path=lambda ctx: ctx.deps.messages_path)
    planner = Planner()
    agent = create_deep_agent(FunctionModel(planner), context_manager=middleware)
    deps = DeepAgentDeps(base_dir=tmp_path, session_id="s")
    first = await agent.run("Plan, then look around.", deps=deps)
    call = next(
        p for m in first.all_messages() for p in m.parts if isinstance(p, ToolCallPart) and p.tool_name == "write_todos"
    )
    result = next(
        p
        for m in first.all_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "write_todos"
    )

    middleware.request_compact()
    planner.seen.clear()
    await agent.run("What is left?", deps=deps, message_history=first.all_messages())
    (sent,) = planner.seen  # one request, compacted before it was sent
    assert any(is_summary_message(m) for m in sent)
    parts = [p for m in sent for p in m.parts]
    assert call in parts and result in parts
    assert parts.index(result) == parts.index(call) + 1  # the call and its result, paired
