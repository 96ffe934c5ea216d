"""A scripted coding session for the report tests: `create_deep_agent` with a `FunctionModel` that works through
numbered steps (one tool call per request), some of whose outputs are large enough to be evicted; the window is
small enough that the context manager compacts several times."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.eviction import EvictionProcessor
from summarization_pydantic_ai import ContextManagerMiddleware, count_tokens_approximately

MODEL_NAME = "gpt-4o-mini"
"""A model genai-prices knows: the session has a price."""
SESSION_ID = "report-demo"


@dataclass
class Script:
    """Request k calls `run_step(k)`; the last request answers. Steps in `big_steps` produce an output above the
    eviction limit."""

    requests: int
    big_steps: frozenset[int]
    calls: int = 0
    sizes: list[int] = field(default_factory=list[int])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        tokens = count_tokens_approximately(messages)
        self.sizes.append(tokens)
        usage = RequestUsage(input_tokens=tokens, output_tokens=40)
        if self.calls >= self.requests:
            return ModelResponse(parts=[TextPart("All steps done.")], usage=usage, model_name=MODEL_NAME)
        call = ToolCallPart("run_step", {"n": self.calls}, tool_call_id=f"step-{self.calls}")
        return ModelResponse(parts=[call], usage=usage, model_name=MODEL_NAME)


def step_output(n: int, big: bool) -> str:
    lines = 900 if big else 45
    return "\n".join(
        f"step {n} line {i}: compiled module_{i % 17}.py ok, 3 warnings, elapsed {i * 7 % 97} ms" for i in range(lines)
    )


async def run_scripted_session(
    base_dir: Path,
    *,
    requests: int = 200,
    big_steps: frozenset[int] = frozenset({20, 60, 100, 140, 180}),
    max_tokens: int = 60_000,
) -> Path:
    """Run the session; returns its messages.json."""
    script = Script(requests, big_steps)
    middleware = ContextManagerMiddleware(
        summarization_model=None, max_tokens=max_tokens, messages_path=lambda ctx: ctx.deps.messages_path
    )
    agent = create_deep_agent(
        FunctionModel(script, model_name=MODEL_NAME),
        context_manager=middleware,
        eviction=EvictionProcessor(token_limit=5_000),
    )

    @agent.tool_plain
    def run_step(n: int) -> str:  # pyright: ignore[reportUnusedFunction]
        """Run one step of the build."""
        return step_output(n, n in big_steps)

    deps = DeepAgentDeps(base_dir=base_dir, session_id=SESSION_ID)
    await agent.run("Build the project step by step.", deps=deps, usage_limits=UsageLimits(request_limit=None))
    assert deps.messages_path is not None
    return deps.messages_path
