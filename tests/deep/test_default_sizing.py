"""The default `create_deep_agent` stack sized to the context window: eviction scales with it, one step's outputs
together cannot push a request past it, and the default context manager plans its compactions by cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.eviction import EvictionProcessor
from summarization_pydantic_ai import (
    CachePolicy,
    ContextConfig,
    ContextManagerMiddleware,
    count_tokens_approximately,
    validate_history,
)

WINDOW = 32_000


def spine_of(agent: Agent[Any, Any], kind: type[Any]) -> Any:
    capabilities = list(agent.root_capability.capabilities)  # type: ignore[attr-defined]
    return next(c for c in capabilities if isinstance(c, kind))


class ParallelLogs:
    """One step of parallel `run_tests` calls (the sizes given, in tokens), then an answer; records each request's
    size as the model receives it (messages, instructions and tool definitions)."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.request_tokens: list[int] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tools = sum(len(str(t.parameters_json_schema)) + len(t.description or "") for t in info.function_tools)
        self.request_tokens.append(count_tokens_approximately(messages) + (len(info.instructions or "") + tools) // 4)
        assert validate_history(messages) == []
        if len(self.request_tokens) == 1:
            calls = [ToolCallPart("run_tests", {"group": i, "tokens": n}, f"t{i}") for i, n in enumerate(self.sizes)]
            return ModelResponse(parts=calls)
        return ModelResponse(parts=[TextPart("Both suites ran.")])


def run_tests(group: int, tokens: int) -> str:
    """A pytest -v log of about `tokens` tokens."""
    line = "tests/group_{g}/test_{i:04d}.py::test_case_{i} PASSED                    [{p:3d}%]"
    count = tokens * 4 // len(line.format(g=group, i=0, p=0))
    lines = [line.format(g=group, i=i, p=i % 100) for i in range(count)]
    return "\n".join(lines) + f"\n==== {count} passed in 12.00s ===="


class Named(FunctionModel):
    """A scripted model under a provider's name, as genai-prices knows it (no provider package needed)."""

    def __init__(self, provider: str, name: str) -> None:
        super().__init__(lambda messages, info: ModelResponse(parts=[TextPart("ok")]), model_name=name)
        self._provider = provider

    @property
    def system(self) -> str:
        return self._provider


async def play(script: ParallelLogs, root: Path, **kwargs: Any) -> list[int]:
    agent = create_deep_agent(FunctionModel(script), tools=[run_tests], cost_tracking=False, **kwargs)
    deps = DeepAgentDeps.on_disk(root / "project", base_dir=root / ".pydantic-deep", session_id="s")
    await agent.run("Run the suites.", deps=deps)
    return script.request_tokens


async def test_parallel_logs_each_under_the_fixed_limit_no_longer_pass_the_window(tmp_path: Path) -> None:
    """Logs of 10k, 14k and 12k tokens (each under the former fixed 20,000) arrive in one step: with the window
    known they are evicted, and the request stays inside it (36k+ against 32k before)."""
    middleware = ContextManagerMiddleware(max_tokens=WINDOW)  # the window, as the stack learns it from its manager
    sent = await play(ParallelLogs([10_000, 14_000, 12_000]), tmp_path, context_manager=middleware)
    assert len(sent) == 2 and max(sent) <= WINDOW


async def test_many_outputs_each_under_the_scaled_limit_fit_the_window_together(tmp_path: Path) -> None:
    """Twelve outputs of 3,000 tokens each pass a tenth of the window one by one; together they would be 36k: the
    largest are evicted until the step fits a quarter of the window."""
    sent = await play(ParallelLogs([3_000] * 12), tmp_path, max_tokens=WINDOW)
    assert max(sent) <= WINDOW
    assert sent[-1] - sent[0] <= 0.25 * WINDOW + 12 * 200  # the step, plus the calls and the answers' framing


def test_the_eviction_limits_follow_the_window() -> None:
    evictor = spine_of(create_deep_agent("test", max_tokens=WINDOW), EvictionProcessor)
    assert (evictor.token_limit, evictor.step_token_limit) == (3_200, 8_000)
    known = spine_of(create_deep_agent(Named("anthropic", "claude-sonnet-4-5")), EvictionProcessor)  # 200k
    assert (known.token_limit, known.step_token_limit) == (20_000, 50_000)
    unknown = spine_of(create_deep_agent("test"), EvictionProcessor)  # no window known: the former defaults
    assert (unknown.token_limit, unknown.step_token_limit) == (20_000, None)
    config = ContextConfig("sliding_window", max_tokens=WINDOW)
    assert spine_of(create_deep_agent("test", context=config), EvictionProcessor).token_limit == 3_200
    mine = EvictionProcessor(token_limit=50_000)
    assert spine_of(create_deep_agent("test", max_tokens=WINDOW, eviction=mine), EvictionProcessor) is mine


def test_the_default_context_manager_plans_by_the_models_cache_prices() -> None:
    agent = create_deep_agent(Named("openai", "gpt-4o"), max_tokens=WINDOW)
    middleware = spine_of(agent, ContextManagerMiddleware)
    assert middleware.max_tokens == WINDOW
    policy = middleware.cache_policy
    assert isinstance(policy, CachePolicy) and policy.cache_read == pytest.approx(0.5) and policy.cache_write == 1.0
    assert policy.thin is False  # it keeps only the working set: nothing further back to reach
    default = spine_of(create_deep_agent("test"), ContextManagerMiddleware).cache_policy
    assert default == CachePolicy(thin=False)  # Anthropic's ratios when the model's are unknown


def test_a_window_given_twice_must_agree() -> None:
    with pytest.raises(ValueError, match="ContextConfig"):
        create_deep_agent("test", max_tokens=WINDOW, context=ContextConfig("sliding_window", max_tokens=64_000))
    with pytest.raises(ValueError, match="ContextConfig"):
        create_deep_agent("test", max_tokens=WINDOW, context=ContextConfig("sliding_window"))
    with pytest.raises(ValueError, match="ContextManagerMiddleware you pass"):
        create_deep_agent("test", max_tokens=WINDOW, context_manager=ContextManagerMiddleware())
    with pytest.raises(ValueError, match="max_tokens must be"):
        create_deep_agent("test", max_tokens=500)
    agent = create_deep_agent("test", max_tokens=WINDOW, context_manager=ContextManagerMiddleware(max_tokens=WINDOW))
    assert spine_of(agent, EvictionProcessor).token_limit == 3_200
