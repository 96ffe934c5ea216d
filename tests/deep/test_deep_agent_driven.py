"""`create_deep_agent(agent_driven=True)`: the memory file is written with the harness's file tools, on the run's
backend, and read back from there."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep import DeepAgentDeps, backend_memory_reader, create_deep_agent
from summarization_pydantic_ai import (
    AgentCompressionCompleted,
    AgentDrivenCompression,
    ContextEvent,
    ContextManagerMiddleware,
    UsageAnchoredCounter,
    validate_history,
)

MEMORY = "# Recent\n- reading the modules for the user\n- next: the remaining modules"


class Reader:
    """Reads modules; when asked to compress, writes its memory with `write_file` and calls compression_complete."""

    def __init__(self) -> None:
        self.step = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = {p.tool_name for p in last.parts if isinstance(p, ToolReturnPart)}
        if any(
            "compression_complete" in str(getattr(p, "content", "")) for p in last.parts if p.part_kind == "user-prompt"
        ):
            if "write_file" in returned:
                return ModelResponse(parts=[ToolCallPart("compression_complete", {})])
            args = {"path": "/memory/short_term/recent.md", "content": MEMORY}
            return ModelResponse(parts=[ToolCallPart("write_file", args)])
        self.step += 1
        if self.step <= 20:
            return ModelResponse(parts=[ToolCallPart("module", {"n": self.step})])
        return ModelResponse(parts=[TextPart("done")])


def module(n: int) -> str:
    return f"# module {n}\n" + "def f():\n    return 42\n" * 60


async def test_the_deep_agent_writes_its_memory_on_its_backend(tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(
        max_tokens=6_000,
        summarization_model=None,
        messages_path=lambda ctx: ctx.deps.messages_path,
        token_counter=UsageAnchoredCounter(),
        event_callback=events.append,
    )
    agent = create_deep_agent(FunctionModel(Reader()), context_manager=middleware, agent_driven=True, todos=False)
    agent.tool_plain(module)
    deps = DeepAgentDeps(base_dir=tmp_path, session_id="s")
    result = await agent.run("Read the modules.", deps=deps)
    assert await deps.backend.read("/memory/short_term/recent.md") == MEMORY
    assert not (tmp_path / "memory").exists()  # on the backend, not in the process's directory
    [completed] = [e for e in events if isinstance(e, AgentCompressionCompleted)]
    assert completed.tokens_after <= 0.20 * 6_000
    history = result.all_messages()
    assert validate_history(history, for_request=False) == []
    assert any(isinstance(p, CompactionPart) and MEMORY in (p.content or "") for m in history for p in m.parts)


def test_agent_driven_true_shares_the_middleware_and_its_counter() -> None:
    agent = create_deep_agent("test", agent_driven=True)
    capabilities = list(agent.root_capability.capabilities)  # type: ignore[attr-defined]
    [middleware] = [c for c in capabilities if isinstance(c, ContextManagerMiddleware)]
    [compression] = [c for c in capabilities if isinstance(c, AgentDrivenCompression)]
    assert capabilities.index(compression) > capabilities.index(middleware)
    assert compression.middleware is middleware and compression.reader is backend_memory_reader
    assert isinstance(middleware.token_counter, UsageAnchoredCounter)
    assert compression.token_counter is middleware.token_counter
    with pytest.raises(TypeError, match="agent_driven must be"):
        create_deep_agent("test", agent_driven="yes")  # type: ignore[arg-type]
