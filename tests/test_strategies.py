"""`ContextConfig`: validated settings, the capability stack of each strategy, and the 100-turn browser session."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai.capabilities import AbstractCapability

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.eviction import EvictionProcessor
from pydantic_deep.patch import PatchToolCalls
from summarization_pydantic_ai import (
    ContextConfig,
    ContextManagerMiddleware,
    ContextMetrics,
    SlidingWindowProcessor,
    validate_history,
)
from summarization_pydantic_ai.compression import MessageCompressor
from summarization_pydantic_ai.evals import BrowserSession
from summarization_pydantic_ai.phases import PhaseCheckpoints
from summarization_pydantic_ai.pruning import ImportancePruner

WINDOW = 32_000
ZERO_LLM = ("sliding_window", "checkpoint", "hybrid")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"strategy": "rolling"}, "unknown strategy 'rolling'; use one of sliding_window"),
        ({"compression_level": "max"}, "unknown compression_level 'max'"),
        ({"max_tokens": 10}, "max_tokens must be an int >= 1000"),
        ({"window_size": 2}, "window_size must be an int >= 4"),
        ({"snapshot_depth": 0}, "snapshot_depth must be an int >= 1"),
        ({"trigger": 1.2}, r"trigger must be a fraction of the window in \(0, 1\)"),
        ({"target": 0}, "target must be a fraction"),
        ({"trigger": 0.5, "target": 0.6}, r"target \(0.6\) must be below trigger \(0.5\)"),
        ({"checkpoint_phases": ("login", "login")}, "checkpoint_phases must be unique"),
        ({"checkpoint_phases": ("login", " ")}, "non-empty names"),
        ({"importance_threshold": -1}, "importance_threshold must be a positive number"),
    ],
)
def test_bad_settings_fail_at_construction_with_a_clear_error(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ContextConfig(**settings)


def test_wrong_types_fail_at_construction() -> None:
    with pytest.raises(TypeError, match="not a string"):
        ContextConfig(checkpoint_phases="login")
    with pytest.raises(TypeError, match="metrics must be a ContextMetrics"):
        ContextConfig(metrics="yes")  # type: ignore[arg-type]


def test_the_sliding_window_stack_for_a_plain_agent() -> None:
    config = ContextConfig("sliding_window", max_tokens=WINDOW, window_size=60)
    stack = config.capabilities()
    assert [type(c) for c in stack] == [
        ContextMetrics,
        MessageCompressor,
        SlidingWindowProcessor,
        SlidingWindowProcessor,
        ContextManagerMiddleware,
    ]
    compressor, by_tokens, by_count = stack[1], stack[2], stack[3]
    assert isinstance(compressor, MessageCompressor)
    assert (compressor.level, compressor.snapshot_depth) == ("medium", None)
    assert isinstance(by_tokens, SlidingWindowProcessor) and isinstance(by_count, SlidingWindowProcessor)
    assert (by_tokens.trigger, by_tokens.keep, by_tokens.max_tokens) == (("fraction", 0.8), ("fraction", 0.15), WINDOW)
    assert by_tokens.cache_policy is config.cache_policy is not None
    assert (by_count.trigger, by_count.keep) == (("messages", 60), ("messages", 30))
    middleware = stack[-1]
    assert isinstance(middleware, ContextManagerMiddleware)
    assert middleware.summarization_model is None, "a zero-LLM strategy never calls a summary model"
    assert (middleware.compress_threshold, middleware.max_tokens) == (0.98, WINDOW)  # just above the policy's limit
    assert middleware.cache_policy is None  # a last resort is not planned
    assert config.metrics is stack[0] and config.metrics.strategy == "sliding_window"


def test_preserve_errors_reaches_every_step() -> None:
    kept = ContextConfig("sliding_window", max_tokens=WINDOW)
    dropped = ContextConfig("sliding_window", max_tokens=WINDOW, preserve_errors=False)
    assert {c.keep_errors for c in kept.capabilities() if hasattr(c, "keep_errors")} == {3}  # type: ignore[attr-defined]
    assert {c.keep_errors for c in dropped.capabilities() if hasattr(c, "keep_errors")} == {0}  # type: ignore[attr-defined]
    pruner = next(c for c in ContextConfig("hybrid", max_tokens=WINDOW).processors() if isinstance(c, ImportancePruner))
    assert pruner.keep_predicate is not None, "failed tool exchanges are never pruned"
    no_errors = ContextConfig("hybrid", max_tokens=WINDOW, preserve_errors=False).processors()
    assert next(c for c in no_errors if isinstance(c, ImportancePruner)).keep_predicate is None


def test_the_hybrid_stack_compresses_checkpoints_prunes_then_slides() -> None:
    config = ContextConfig(
        "hybrid",
        max_tokens=WINDOW,
        compression_level="high",
        snapshot_depth=3,
        checkpoint_phases=("login", "cart"),
        importance_threshold=6.0,
    )
    steps = config.processors()
    assert [type(s) for s in steps] == [MessageCompressor, PhaseCheckpoints, ImportancePruner, SlidingWindowProcessor]
    compressor, checkpoints, pruner, backstop = steps
    assert isinstance(compressor, MessageCompressor) and (compressor.level, compressor.snapshot_depth) == ("high", 3)
    assert isinstance(checkpoints, PhaseCheckpoints) and checkpoints.phases == ("login", "cart")
    assert config.checkpoints is checkpoints, "the application marks phases done on it"
    assert isinstance(pruner, ImportancePruner)
    assert (pruner.target_tokens, pruner.trigger_tokens, pruner.protect_score) == (9_600, 25_600, 6.0)
    assert pruner.cache_policy is config.cache_policy and pruner.max_tokens == WINDOW
    assert isinstance(backstop, SlidingWindowProcessor) and backstop.trigger == ("fraction", 0.9)
    without_phases = ContextConfig("hybrid", max_tokens=WINDOW, compression_level="none").processors()
    assert [type(s) for s in without_phases] == [ImportancePruner, SlidingWindowProcessor]


def test_the_checkpoint_stack_and_where_it_archives(tmp_path: Any) -> None:
    config = ContextConfig("checkpoint", max_tokens=WINDOW)
    stack = config.capabilities(messages_path=tmp_path / "messages.json")
    kinds = [type(c) for c in stack]
    checkpoint_stack = [MessageCompressor, PhaseCheckpoints, SlidingWindowProcessor, ContextManagerMiddleware]
    assert kinds == [ContextMetrics, *checkpoint_stack]
    checkpoints, middleware = stack[2], stack[-1]
    assert isinstance(checkpoints, PhaseCheckpoints) and isinstance(middleware, ContextManagerMiddleware)
    assert checkpoints.phases is None, "no declared phases: any name"
    assert checkpoints.history_store is middleware.store, "archived where the middleware records"


def test_hybrid_needs_the_window_to_prune_to() -> None:
    with pytest.raises(ValueError, match="prunes to a token target: set ContextConfig\\(max_tokens"):
        ContextConfig("hybrid").processors()
    assert any(isinstance(c, ImportancePruner) for c in ContextConfig("hybrid").processors("openai:gpt-4o"))


def test_the_summarize_stack_summarizes_in_the_middleware_with_the_run_model() -> None:
    from summarization_pydantic_ai import RUN_MODEL

    config = ContextConfig("summarize", max_tokens=WINDOW, trigger=0.7, target=0.4)
    middleware = config.middleware()
    assert middleware.summarization_model is RUN_MODEL
    assert (middleware.compress_threshold, middleware.keep) == (0.7, ("fraction", 0.2))
    assert config.middleware(messages_path="m.json").messages_path == "m.json", "overrides are passed on"


def test_the_window_comes_from_the_model_when_not_set() -> None:
    assert ContextConfig(model_name="openai:gpt-4o").window() == 128_000
    assert ContextConfig().window("openai:gpt-4o") == 128_000
    assert ContextConfig(max_tokens=50_000).window("openai:gpt-4o") == 50_000


def test_user_event_callback_and_metrics_both_receive_events() -> None:
    seen: list[object] = []
    config = ContextConfig("sliding_window", max_tokens=WINDOW, event_callback=seen.append)
    for step in config.processors():
        callback = step.event_callback  # type: ignore[attr-defined]
        assert callback is not None and callback is not config.event_callback


def test_create_deep_agent_keeps_the_spine_with_a_strategy() -> None:
    config = ContextConfig("sliding_window", max_tokens=WINDOW)
    user = SlidingWindowProcessor(trigger=("messages", 500), keep=100)
    agent = create_deep_agent("test", context=config, capabilities=[user])
    kinds = [type(c) for c in agent.root_capability.capabilities]  # type: ignore[attr-defined]
    order = [ContextMetrics, PatchToolCalls, EvictionProcessor, SlidingWindowProcessor, ContextManagerMiddleware]
    assert [k for k in kinds if k in order] == [
        ContextMetrics,
        PatchToolCalls,
        EvictionProcessor,
        SlidingWindowProcessor,  # the strategy's
        SlidingWindowProcessor,  # the user's, after it
        ContextManagerMiddleware,
    ]
    capabilities: list[AbstractCapability[Any]] = list(agent.root_capability.capabilities)  # type: ignore[attr-defined]
    middleware = next(c for c in capabilities if isinstance(c, ContextManagerMiddleware))
    assert middleware.summarization_model is None and middleware.max_tokens == WINDOW
    assert callable(middleware.messages_path), "the session's messages.json, per DeepAgentDeps"


def test_create_deep_agent_refuses_a_strategy_and_a_middleware_together() -> None:
    with pytest.raises(ValueError, match="either context="):
        create_deep_agent("test", context=ContextConfig(), context_manager=ContextManagerMiddleware())
    with pytest.raises(ValueError, match="leave context_manager on"):
        create_deep_agent("test", context=ContextConfig("summarize"), context_manager=False)
    with pytest.raises(TypeError, match="context must be a ContextConfig"):
        create_deep_agent("test", context="hybrid")  # type: ignore[arg-type]


async def test_create_deep_agent_with_a_strategy_runs_and_records_metrics(tmp_path: Any) -> None:
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok " * 50)])

    config = ContextConfig("sliding_window", max_tokens=WINDOW)
    agent = create_deep_agent(FunctionModel(answer), context=config)
    deps = DeepAgentDeps(base_dir=tmp_path)
    history = (await agent.run("hi", deps=deps)).all_messages()
    await agent.run("again", deps=deps, message_history=history)
    assert config.metrics is not None
    summary = config.metrics.summary()
    assert (summary.runs, summary.requests) == (2, 2)


# -- the synthetic 100-turn browser session (acceptance) ----------------------------------------------------------


@pytest.mark.parametrize("strategy", ZERO_LLM)
async def test_each_zero_llm_preset_keeps_a_100_turn_browser_session_under_the_window(strategy: str) -> None:
    unmanaged = await BrowserSession().run()
    assert unmanaged.max_request_tokens > 5 * WINDOW, "without a strategy the session overflows the window"

    config = ContextConfig(strategy, max_tokens=WINDOW, checkpoint_phases=BrowserSession().phases)  # type: ignore[arg-type]
    result = await BrowserSession().run(config.capabilities())

    assert len(result.turn_requests) == 100
    assert result.summary_requests == 0, "no summary was asked of the model"
    assert result.max_request_tokens < WINDOW
    for history in result.run_histories:
        assert validate_history(history, for_request=False) == []
    assert config.metrics is not None
    summary = config.metrics.summary()
    assert (summary.runs, summary.requests) == (4, 100)
    assert summary.max_request_tokens < WINDOW
    assert summary.reductions > 0 and summary.tokens_saved > 0
    assert summary.average_reduction_pct > 10
    if strategy == "checkpoint":  # the rebuilds wait until they pay for their cache re-write: phases merge
        rebuilt = [p for c in config.metrics.checkpoints for p in c.phases]
        assert config.checkpoints is not None
        pending = [p.name for p in config.checkpoints.pending]
        assert 1 <= summary.checkpoints < 4 and sorted(rebuilt + pending) == sorted(BrowserSession().phases)


async def test_without_a_cache_policy_each_phase_is_rebuilt_at_the_next_request() -> None:
    config = ContextConfig(
        "checkpoint", max_tokens=WINDOW, checkpoint_phases=BrowserSession().phases, cache_policy=None
    )
    await BrowserSession().run(config.capabilities())
    assert config.metrics is not None and config.metrics.summary().checkpoints == 4
    assert [c.phases for c in config.metrics.checkpoints] == [(p,) for p in BrowserSession().phases]


async def test_the_summarize_preset_asks_the_run_model_and_without_one_summarizes_deterministically() -> None:
    with_llm = ContextConfig("summarize", max_tokens=WINDOW)
    result = await BrowserSession().run(with_llm.capabilities())
    assert result.summary_requests > 0, "summarize is the strategy that calls the model"
    assert result.max_request_tokens < WINDOW

    offline = ContextConfig("summarize", max_tokens=WINDOW, summarization_model=None)
    result = await BrowserSession().run(offline.capabilities())
    assert result.summary_requests == 0
    assert result.max_request_tokens < WINDOW
    assert all(validate_history(h, for_request=False) == [] for h in result.run_histories)
    assert offline.metrics is not None and offline.metrics.summary().reductions > 0


async def test_a_deep_agent_with_the_checkpoint_preset_archives_phases_in_the_session_file(tmp_path: Any) -> None:
    from summarization_pydantic_ai import JsonHistoryStore

    session = BrowserSession(turns=40)
    config = ContextConfig("checkpoint", max_tokens=WINDOW)
    agent = create_deep_agent(session.model(), tools=session.tools(), context=config)
    deps = DeepAgentDeps(base_dir=tmp_path)
    result = await session.run(agent=agent, deps=deps)

    assert result.summary_requests == 0 and result.max_request_tokens < WINDOW
    assert config.metrics is not None and config.checkpoints is not None
    rebuilt = [p for c in config.metrics.checkpoints for p in c.phases]
    assert rebuilt and sorted(rebuilt + [p.name for p in config.checkpoints.pending]) == sorted(session.phases)
    assert deps.messages_path is not None
    records = await JsonHistoryStore.open(deps.messages_path).read(limit=10_000)
    assert records.total > len(result.messages), "the archived phases stay in the session file"
    assert validate_history(result.messages, for_request=False) == []
