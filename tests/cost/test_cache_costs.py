"""The prompt cache in the cost figures, end to end through `Agent.run`: each request's cache read / write /
uncached tokens (the provider's where reported, else estimated), each rewrite's net effect, `CacheCollapse`."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai import CacheCollapse, ContextEvent, CostTrackingMiddleware, format_cost, session_costs
from summarization_pydantic_ai.cache import cache_prices
from summarization_pydantic_ai.cost import CACHE_METADATA_KEY, CacheStamp

OUTPUT = "def handler(event):\n    return process(event)\n" * 300  # ~3,400 tokens per read
PRICE_AS = "anthropic:claude-sonnet-4-5"


def reader(reads: int, usage: RequestUsage | None = None, model_name: str | None = None) -> FunctionModel:
    """Reads `reads` files, then answers; with `usage`, every response carries it, as a provider's would."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(isinstance(p, ToolReturnPart) for m in messages for p in m.parts)
        extra: dict[str, Any] = {"usage": usage, "provider_name": "anthropic"} if usage is not None else {}
        if done < reads:
            call = ToolCallPart("read", {"path": f"/src/f{done}.py"}, tool_call_id=f"call{done}")
            return ModelResponse(parts=[call], **extra)
        return ModelResponse(parts=[TextPart("done")], **extra)

    return FunctionModel(respond, model_name=model_name)


def compress_seen_outputs(messages: list[ModelMessage]) -> list[ModelMessage]:
    """The naive policy: shorten every tool output the model has already seen (one request after it arrived)."""
    return [_shortened(m) if i < len(messages) - 1 else m for i, m in enumerate(messages)]


def compress_new_outputs(messages: list[ModelMessage]) -> list[ModelMessage]:
    """The planned policy: shorten a tool output as it enters the history, before any request cached it."""
    return [_shortened(m) if i == len(messages) - 1 else m for i, m in enumerate(messages)]


def _shortened(message: ModelMessage) -> ModelMessage:
    if not isinstance(message, ModelRequest):
        return message
    parts = [
        dataclasses.replace(p, content=p.content[:400]) if isinstance(p, ToolReturnPart) and len(p.content) > 400 else p
        for p in message.parts
    ]
    return dataclasses.replace(message, parts=parts) if parts != message.parts else message


def agent_with(model: FunctionModel, capabilities: list[Any], instructions: str | None = None) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, capabilities=capabilities, instructions=instructions)

    @agent.tool_plain
    def read(path: str) -> str:
        return f"# {path}\n{OUTPUT}"

    return agent


GUIDE = "Follow the project's coding guide.\n" * 2500  # a long stable head: ~20,000 tokens of instructions


async def run_session(
    policy: Any, reads: int = 12, instructions: str | None = None
) -> tuple[list[ModelMessage], list[ContextEvent]]:
    events: list[ContextEvent] = []
    cost = CostTrackingMiddleware(price_as=PRICE_AS, event_callback=events.append)
    capabilities: list[Any] = [ProcessHistory(policy), cost] if policy else [cost]
    result = await agent_with(reader(reads), capabilities, instructions).run("read the sources")
    return result.all_messages(), events


async def test_every_response_carries_its_cache_figures_marked_estimated() -> None:
    messages, _ = await run_session(None)
    stamps = [CacheStamp.parse(m.metadata) for m in messages if isinstance(m, ModelResponse)]
    assert len(stamps) == 13 and all(s is not None and s.source == "estimated" for s in stamps)
    assert all(s is not None and s.model == PRICE_AS for s in stamps)
    totals = session_costs(messages)
    cache = totals.cache
    assert cache.requests == 13 and cache.reported_requests == 0
    assert cache.cache_read_share > 0.8  # a growing conversation reads nearly all of its prefix back
    prices = cache_prices(PRICE_AS)
    assert cache.cost_usd is not None and prices is not None
    uncached = cache.tokens.input_tokens * prices.input + cache.output_tokens * prices.output
    assert cache.cost_usd < uncached / 2  # the cache counted: far below the price of the same tokens uncached
    assert totals.reductions == ()


async def test_net_savings_of_the_rewrites_equal_the_difference_with_the_session_left_alone() -> None:
    # The accounting is exact for a session where only the rewrites differ: what the reductions saved, net of the
    # re-writes they caused, is what the unmanaged session cost more.
    alone, _ = await run_session(None)
    naive, _ = await run_session(compress_seen_outputs)
    unmanaged, managed = session_costs(alone).cache.cost_usd, session_costs(naive).cache.cost_usd
    assert unmanaged is not None and managed is not None
    assert session_costs(naive).net_saved_usd == unmanaged - managed


async def test_the_naive_policy_costs_more_than_it_saves_and_the_planned_one_is_cheaper() -> None:
    # A long stable head. Each rewrite of an output the model has seen makes what follows it a miss; once the
    # conversation is more than 20 blocks past the last entry that survives (the first request's), Anthropic's
    # lookback no longer reaches it and the whole prefix, head included, is written again.
    naive, naive_events = await run_session(compress_seen_outputs, instructions=GUIDE)
    planned, planned_events = await run_session(compress_new_outputs, instructions=GUIDE)
    naive_totals, planned_totals = session_costs(naive), session_costs(planned)
    assert len(naive_totals.reductions) == 11
    assert all(r.tokens_removed > 3000 and r.rewrite_tokens > 0 for r in naive_totals.reductions)
    assert [r.rewrite_tokens > 20_000 for r in naive_totals.reductions] == [False] * 9 + [True] * 2
    net = naive_totals.net_saved_usd
    assert net is not None and net < 0
    assert planned_totals.reductions == ()
    assert planned_totals.cache.cost_usd is not None and naive_totals.cache.cost_usd is not None
    assert planned_totals.cache.cost_usd < naive_totals.cache.cost_usd
    collapses = [e for e in naive_events if isinstance(e, CacheCollapse)]
    assert len(collapses) == 11 and {c.reason for c in collapses} == {"compacted"}
    assert all(c.missed_tokens >= 2000 and c.source == "estimated" for c in collapses)
    assert not [e for e in planned_events if isinstance(e, CacheCollapse)]


async def test_the_providers_usage_is_shown_and_the_prediction_kept_beside_it() -> None:
    usage = RequestUsage(input_tokens=20_000, cache_read_tokens=15_000, cache_write_tokens=4_000, output_tokens=50)
    cost = CostTrackingMiddleware()
    agent = agent_with(reader(2, usage, "claude-sonnet-4-5"), [cost])
    result = await agent.run("read")
    totals = cost.totals
    assert totals is not None
    cache = totals.cache
    assert cache.reported_requests == 3
    assert (cache.reported.cache_read_tokens, cache.reported.cache_write_tokens) == (45_000, 12_000)
    assert cache.predicted_on_reported.input_tokens > 0  # the simulator's own figures, side by side
    assert session_costs(result.all_messages()).cache == cache


async def test_cost_recorded_events_carry_the_cache_split() -> None:
    events: list[ContextEvent] = []
    cost = CostTrackingMiddleware(price_as=PRICE_AS, on_cost=events.append)
    await agent_with(reader(3), [cost]).run("read")
    recorded = [e for e in events if e.__class__.__name__ == "CostRecorded"]
    assert len(recorded) == 4
    last = recorded[-1]
    assert last.cache_source == "estimated"
    assert last.cache_read_tokens > 0 and last.uncached_tokens is not None


async def test_simulation_can_be_turned_off() -> None:
    cost = CostTrackingMiddleware(price_as=PRICE_AS, simulate_cache=False)
    result = await agent_with(reader(1), [cost]).run("read")
    responses = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
    assert all(CACHE_METADATA_KEY not in (m.metadata or {}) for m in responses)
    assert session_costs(result.all_messages()).cache.requests == 0


async def test_a_stamp_from_another_version_is_ignored_not_an_error() -> None:
    response = ModelResponse(parts=[TextPart("x")], metadata={CACHE_METADATA_KEY: {"read": "many"}})
    assert CacheStamp.parse(response.metadata) is None
    assert session_costs([response]).cache.requests == 0
    assert Decimal(0) == session_costs([]).net_saved_usd


async def test_price_as_takes_a_provider_prefixed_name() -> None:
    cost = CostTrackingMiddleware(price_as="openai:gpt-4.1")
    await agent_with(reader(1), [cost]).run("read")
    totals = cost.totals
    assert totals is not None and totals.total.cost_usd is not None and totals.total.cost_usd > 0
    assert totals.unpriced_models == ()


def test_a_saving_is_shown_with_its_sign() -> None:
    assert format_cost(Decimal("-2.5"), signed=True) == "-$2.50"
    assert format_cost(Decimal("0.0123"), signed=True) == "+$0.0123"
    assert format_cost(Decimal(0), signed=True) == "$0.00"
    assert format_cost(None, signed=True) == "unknown"
