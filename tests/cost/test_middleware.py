"""`CostTrackingMiddleware` through `Agent.run`: totals to the cent, budgets, resume, unknown models, events."""

from __future__ import annotations

import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    BudgetExceeded,
    BudgetWarningIssued,
    CallbackFailed,
    ContextEvent,
    ContextManagerMiddleware,
    CostRecorded,
    JsonHistoryStore,
    validate_history,
)
from summarization_pydantic_ai.cost import BudgetExceededError, CostTrackingMiddleware, session_costs

from ._scripted import AGENT_USAGE, SUMMARY_USAGE, Reader, SummaryModel, hand_price, make_agent, read_files

PER_REQUEST = hand_price(AGENT_USAGE, "gpt-4o")


def context_manager(path: Path, summarizer: SummaryModel | None = None, **kwargs: Any) -> ContextManagerMiddleware:
    model = FunctionModel(summarizer, model_name="gpt-4o-mini") if summarizer else None
    return ContextManagerMiddleware(
        messages_path=path, max_tokens=3_000, compress_threshold=0.5, summarization_model=model, **kwargs
    )


async def test_totals_match_calc_price_to_the_cent_with_the_summarizer_included(tmp_path: Path) -> None:
    reader, summarizer = Reader(), SummaryModel()
    manager = context_manager(tmp_path / "messages.json", summarizer)
    cost = CostTrackingMiddleware(context_manager=manager)
    agent = make_agent(reader, [manager, cost])
    await read_files(agent, 6)

    totals = cost.totals
    assert totals is not None
    assert summarizer.calls >= 2
    expected = PER_REQUEST * reader.calls + hand_price(SUMMARY_USAGE, "gpt-4o-mini") * summarizer.calls
    assert totals.total.cost_usd is not None
    assert round(totals.total.cost_usd, 2) == round(expected, 2)
    assert totals.total.cost_usd == expected
    assert (totals.agent.requests, totals.summarizer.requests) == (reader.calls, summarizer.calls)
    records = await JsonHistoryStore.open(tmp_path / "messages.json").load_all()
    assert session_costs(records).total == totals.total  # what the store holds says the same


async def test_a_budget_stops_the_run_before_the_request_that_would_pass_it(tmp_path: Path) -> None:
    reader = Reader(reads=6)
    manager = context_manager(tmp_path / "messages.json")
    budget = PER_REQUEST * Decimal("3.5")
    events: list[ContextEvent] = []
    cost = CostTrackingMiddleware(max_cost_usd=budget, context_manager=manager, event_callback=events.append)
    agent = make_agent(reader, [manager, cost])

    with pytest.raises(BudgetExceededError) as caught:
        await agent.run("read six files")

    error = caught.value
    assert reader.calls == 3, "the fourth request (which would pass the budget) was never sent"
    assert error.budget == "max_cost_usd" and error.limit == budget
    assert error.spent == PER_REQUEST * 3
    assert error.request == 4
    assert "max_cost_usd" in str(error) and "request 4" in str(error)
    assert validate_history(error.messages) == []
    assert isinstance(error.messages[-1], ModelRequest)
    stored = await JsonHistoryStore.open(tmp_path / "messages.json").load_all()
    assert validate_history(stored) == []
    assert [e.request for e in events if isinstance(e, BudgetExceeded)] == [4]

    # The refused request is sent once the budget allows it; nothing was lost.
    bigger = CostTrackingMiddleware(max_cost_usd=budget * 2, context_manager=manager)
    result = await make_agent(reader, [manager, bigger]).run(None, message_history=error.messages)
    assert result.output.startswith("done")
    assert reader.calls == 7


async def test_a_session_budget_counts_the_earlier_runs_and_the_token_budget_counts_tokens(tmp_path: Path) -> None:
    reader = Reader()
    manager = context_manager(tmp_path / "messages.json")
    cost = CostTrackingMiddleware(session_max_cost_usd=PER_REQUEST * Decimal("4.5"), context_manager=manager)
    agent = make_agent(reader, [manager, cost])
    history = (await agent.run("read file 0")).all_messages()
    history = (await agent.run("read file 1", message_history=history)).all_messages()
    with pytest.raises(BudgetExceededError) as caught:
        await agent.run("read file 2", message_history=history)
    assert caught.value.budget == "session_max_cost_usd"
    assert reader.calls == 4

    per_request_tokens = AGENT_USAGE.input_tokens + AGENT_USAGE.output_tokens
    tokens = CostTrackingMiddleware(max_tokens_total=per_request_tokens * 2)
    with pytest.raises(BudgetExceededError) as caught:
        await make_agent(Reader(), [tokens]).run("read file 3")
    assert caught.value.budget == "max_tokens_total"
    assert caught.value.spent == per_request_tokens
    assert caught.value.request == 2


async def test_a_resumed_session_continues_its_totals(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    reader, summarizer = Reader(), SummaryModel()
    manager = context_manager(path, summarizer)
    first = CostTrackingMiddleware(context_manager=manager)
    agent = make_agent(reader, [manager, first])
    await read_files(agent, 4)
    before = first.totals
    assert before is not None and before.total.cost_usd

    # A new process: new middleware instances, the working context from the file.
    manager2 = context_manager(path, summarizer)
    resumed = CostTrackingMiddleware(context_manager=manager2)
    calls_before = reader.calls
    await make_agent(reader, [manager2, resumed]).run(
        "one more", message_history=await JsonHistoryStore.open(path).load()
    )

    after = resumed.totals
    run = resumed.run_totals
    assert after is not None and run is not None
    assert run.agent.requests == reader.calls - calls_before
    assert after.agent.requests == before.agent.requests + run.agent.requests
    assert after.summarizer.requests == before.summarizer.requests + run.summarizer.requests
    assert before.total.cost_usd is not None and run.total.cost_usd is not None
    assert after.total.cost_usd == before.total.cost_usd + run.total.cost_usd


async def test_an_unknown_model_counts_tokens_reports_unknown_cost_and_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorded: list[CostRecorded] = []
    cost = CostTrackingMiddleware(max_cost_usd=1, on_cost=recorded.append)
    agent = make_agent(Reader(), [cost], model_name="acme-internal-llm-2")
    with caplog.at_level(logging.WARNING, logger="summarization_pydantic_ai"):
        await agent.run("read file 0")
        await agent.run("read file 1")

    totals = cost.totals
    assert totals is not None
    assert totals.total.cost_usd is None  # unknown, never 0
    assert totals.total.total_tokens == 2 * (AGENT_USAGE.input_tokens + AGENT_USAGE.output_tokens)  # the 2nd run
    assert totals.unpriced_models == ("acme-internal-llm-2",)
    assert all(r.cost_usd is None for r in recorded) and len(recorded) == 4  # two runs of two requests
    warnings = [r for r in caplog.records if "acme-internal-llm-2" in r.getMessage()]
    assert len(warnings) == 1


async def test_warning_events_and_the_message_to_the_model(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    reader = Reader(reads=3)  # four requests: the warning is given once, at the second

    def spy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return reader(messages, info)

    events: list[ContextEvent] = []
    cost = CostTrackingMiddleware(
        max_cost_usd=PER_REQUEST * 10, warn_fraction=0.1, warn_model=True, event_callback=events.append
    )
    agent = make_agent(reader, [cost])
    agent._model = FunctionModel(spy, model_name="gpt-4o")  # pyright: ignore[reportPrivateUsage]
    result = await agent.run("read file 0")

    warnings = [e for e in events if isinstance(e, BudgetWarningIssued)]
    assert len(warnings) == 1 and warnings[0].budget == "max_cost_usd"
    told = [
        [p for p in request[-1].parts if "Budget warning: max_cost_usd" in str(getattr(p, "content", ""))]
        for request in seen
    ]
    assert [len(parts) for parts in told] == [0, 1, 0, 0]
    assert not any("Budget warning" in str(m) for m in result.all_messages()), "the history keeps no trace of it"


async def test_overflow_retries_are_counted_apart_and_in_the_total(tmp_path: Path) -> None:
    calls = 0

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise ModelContextWindowExceededError("gpt-4o", "prompt is too long")
        return Reader()(messages, info) if calls == 1 else ModelResponse([TextPart("ok")], usage=AGENT_USAGE)

    manager = ContextManagerMiddleware(messages_path=tmp_path / "m.json", max_tokens=100_000, summarization_model=None)
    cost = CostTrackingMiddleware(context_manager=manager)
    agent = make_agent(Reader(), [manager, cost])
    agent._model = FunctionModel(model, model_name="gpt-4o")  # pyright: ignore[reportPrivateUsage]
    history = (await agent.run("read file 0")).all_messages()
    await agent.run("again", message_history=history)

    totals = cost.totals
    assert totals is not None
    assert (totals.agent.requests, totals.overflow_retry.requests) == (2, 1)  # the rejected request cost nothing
    assert totals.total.cost_usd == PER_REQUEST * 3
    stored = session_costs(await JsonHistoryStore.open(tmp_path / "m.json").load_all())
    assert stored.overflow_retry.requests == 1


async def test_a_failing_cost_callback_is_reported_and_the_run_goes_on() -> None:
    events: list[ContextEvent] = []

    def broken(event: CostRecorded) -> None:
        raise RuntimeError("dashboard down")

    cost = CostTrackingMiddleware(on_cost=broken, event_callback=events.append)
    result = await make_agent(Reader(), [cost]).run("read file 0")
    assert result.output.startswith("done")
    assert [e.callback for e in events if isinstance(e, CallbackFailed)] == ["on_cost", "on_cost"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_cost_usd": 0}, ValueError),
        ({"max_cost_usd": -1}, ValueError),
        ({"max_cost_usd": "lots"}, ValueError),
        ({"max_cost_usd": [1]}, TypeError),
        ({"max_tokens_total": 0}, ValueError),
        ({"session_max_tokens_total": 1.5}, ValueError),
        ({"warn_fraction": 0}, ValueError),
        ({"context_manager": object()}, TypeError),
    ],
)
def test_bad_settings_are_refused_clearly(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        CostTrackingMiddleware(**kwargs)


async def test_a_summary_made_at_the_runs_first_request_is_in_the_runs_totals(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    reader, summarizer = Reader(), SummaryModel()
    roomy = ContextManagerMiddleware(messages_path=path, max_tokens=1_000_000)
    first = CostTrackingMiddleware(context_manager=roomy)
    agent = make_agent(reader, [roomy, first])
    history = await read_files(agent, 4)
    before = first.totals
    assert before is not None and summarizer.calls == 0

    # The next run is given a history over the (smaller) limit: it is compacted at the run's very first request.
    manager = context_manager(path, summarizer)
    cost = CostTrackingMiddleware(context_manager=manager)
    await make_agent(reader, [manager, cost]).run("one more", message_history=history)

    run, after = cost.run_totals, cost.totals
    assert run is not None and after is not None and summarizer.calls >= 1
    assert run.summarizer.requests == summarizer.calls
    assert after.summarizer.requests == before.summarizer.requests + run.summarizer.requests
    assert before.total.cost_usd is not None and run.total.cost_usd is not None
    assert after.total.cost_usd == before.total.cost_usd + run.total.cost_usd
