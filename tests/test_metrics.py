"""`ContextMetrics`: per-request records, reductions with their steps, per-run and per-session summaries, spans."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai import (
    CompactionCompleted,
    ContextMetrics,
    SlidingWindowProcessor,
    UsageUpdated,
    count_tokens_approximately,
)


def _tool_agent(capabilities: list[object], calls_per_run: int = 6) -> Agent[None, str]:
    """Each run: `calls_per_run` calls of a tool returning ~2,000 characters, then an answer."""
    state = {"in_run": 0}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        state["in_run"] += 1
        usage = RequestUsage(input_tokens=100 + len(messages), output_tokens=7)
        if state["in_run"] > calls_per_run:
            state["in_run"] = 0
            return ModelResponse(parts=[TextPart("done")], usage=usage)
        call = ToolCallPart("fetch", {"n": len(messages)}, tool_call_id=f"c{len(messages)}")
        return ModelResponse(parts=[call], usage=usage)

    agent = Agent(FunctionModel(respond), capabilities=capabilities)  # type: ignore[arg-type]

    @agent.tool_plain
    def fetch(n: int) -> str:
        return f"page {n}\n" + "lorem ipsum dolor sit amet " * 80

    return agent


async def test_every_request_is_recorded_with_provider_usage_per_run_and_session() -> None:
    metrics = ContextMetrics()
    agent = _tool_agent([metrics], calls_per_run=3)
    history = (await agent.run("first")).all_messages()
    await agent.run("second", message_history=history)

    assert metrics.runs == 2
    requests = metrics.requests
    assert [(r.run, r.request) for r in requests] == [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (2, 2), (2, 3), (2, 4)]
    assert all(r.tokens_sent == r.tokens_before for r in requests), "nothing reduces: sent as it came"
    assert [r.input_tokens for r in requests] == [100 + r.messages_sent for r in requests]
    session = metrics.summary()
    assert (session.runs, session.requests, session.output_tokens) == (2, 8, 56)
    assert session.input_tokens == sum(100 + r.messages_sent for r in requests)
    assert session.reductions == 0 and session.tokens_saved == 0
    assert session.max_request_tokens == max(r.tokens_sent for r in requests) == requests[-1].tokens_sent
    last = metrics.summary(run=-1)
    assert (last.runs, last.requests) == (1, 4)
    assert last.tokens_sent == sum(r.tokens_sent for r in requests if r.run == 2)
    assert metrics.summary(run=1).tokens_sent + last.tokens_sent == session.tokens_sent


async def test_a_request_that_went_out_smaller_is_a_reduction_named_by_its_step() -> None:
    metrics = ContextMetrics()
    window = SlidingWindowProcessor(trigger=("messages", 8), keep=("messages", 3), event_callback=metrics.record)
    agent = _tool_agent([metrics, window], calls_per_run=10)
    await agent.run("go")

    reductions = metrics.reductions
    assert reductions, "the window slid"
    for reduction in reductions:
        assert reduction.steps == ("SlidingWindowProcessor",)
        assert reduction.strategy == "SlidingWindowProcessor"  # no label: the steps
        assert reduction.tokens_after < reduction.tokens_before
        assert reduction.messages_after < reduction.messages_before
        assert reduction.pct_reduced == pytest.approx(100 * reduction.tokens_saved / reduction.tokens_before)
        request = next(r for r in metrics.requests if (r.run, r.request) == (reduction.run, reduction.request))
        assert (request.tokens_before, request.tokens_sent) == (reduction.tokens_before, reduction.tokens_after)
    summary = metrics.summary()
    assert summary.reductions == len(reductions)
    assert summary.tokens_saved == sum(r.tokens_saved for r in reductions)
    assert summary.average_reduction_pct == pytest.approx(sum(r.pct_reduced for r in reductions) / len(reductions))
    assert summary.steps == (("SlidingWindowProcessor", len(reductions)),)
    assert summary.max_request_tokens < max(r.tokens_before for r in metrics.requests)
    assert "SlidingWindowProcessor x" in str(summary)


async def test_the_sent_size_counts_messages_instructions_and_tools() -> None:
    metrics = ContextMetrics()
    agent = _tool_agent([metrics], calls_per_run=1)
    result = await agent.run("hello")
    first, second = metrics.requests
    overhead = first.tokens_sent - count_tokens_approximately(result.all_messages()[:1])
    assert overhead > 0, "the tool definition is part of the request"
    assert second.tokens_sent == count_tokens_approximately(result.all_messages()[:3]) + overhead


def test_events_outside_a_run_become_reductions_when_they_carry_sizes() -> None:
    metrics = ContextMetrics(strategy="manual")
    completed = CompactionCompleted("SummarizationProcessor", 40, 5, 9_000, 1_500, 35, 34, 0.1, "deterministic")
    metrics.record(completed)
    metrics.record(UsageUpdated("ContextManagerMiddleware", 0.5, 100, 200, 3))  # not a reduction
    (reduction,) = metrics.reductions
    assert (reduction.strategy, reduction.steps) == ("manual", ("SummarizationProcessor",))
    assert (reduction.tokens_before, reduction.tokens_after, reduction.run) == (9_000, 1_500, None)
    assert (reduction.messages_before, reduction.messages_after) == (40, 5)
    metrics.reset()
    assert metrics.summary().reductions == 0 and metrics.runs == 0


async def test_run_index_errors_name_the_runs_there_are() -> None:
    metrics = ContextMetrics()
    with pytest.raises(ValueError, match="0 run"):
        metrics.summary(run=-1)
    await _tool_agent([metrics], calls_per_run=0).run("x")
    with pytest.raises(ValueError, match=r"1\.\.1 or -1"):
        metrics.summary(run=2)
    assert metrics.summary(run=1).requests == 1


def test_a_counter_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="token_counter"):
        ContextMetrics(token_counter=42)  # type: ignore[arg-type]


async def test_requests_and_runs_set_span_attributes() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    metrics = ContextMetrics(strategy="sliding_window")
    window = SlidingWindowProcessor(trigger=("messages", 8), keep=("messages", 3), event_callback=metrics.record)
    instrumentation = Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))
    await _tool_agent([instrumentation, metrics, window], calls_per_run=10).run("go")

    spans = exporter.get_finished_spans()
    per_request = [dict(s.attributes or {}) for s in spans if "context.tokens_sent" in (s.attributes or {})]
    assert len(per_request) == len(metrics.requests) == 11
    reduced = [a for a in per_request if a["context.reduction_pct"] > 0]
    assert len(reduced) == len(metrics.reductions)
    assert all(a["context.reduction_steps"] == ("SlidingWindowProcessor",) for a in reduced)
    assert all(a["context.strategy"] == "sliding_window" for a in per_request)
    (run,) = [dict(s.attributes or {}) for s in spans if "context.run.requests" in (s.attributes or {})]
    assert run["context.run.requests"] == 11
    assert run["context.run.reductions"] == len(metrics.reductions)
    assert run["context.run.tokens_saved"] == metrics.summary().tokens_saved
