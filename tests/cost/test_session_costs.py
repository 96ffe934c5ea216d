"""`session_costs`: a recorded session priced with genai-prices, the summarizer's calls included."""

from __future__ import annotations

import logging
from decimal import Decimal
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai import ContextManagerMiddleware, JsonHistoryStore, is_summary_message, summary_info
from summarization_pydantic_ai.cost import (
    REQUEST_KIND_KEY,
    SUMMARIZER_USAGE_KEY,
    Spend,
    format_cost,
    session_costs,
)

from ._scripted import AGENT_USAGE, SUMMARY_USAGE, Reader, SummaryModel, hand_price, make_agent, read_files


async def run_session(path: Path, prompts: int, reader: Reader, summarizer: SummaryModel) -> list[ModelMessage]:
    middleware = ContextManagerMiddleware(
        messages_path=path,
        max_tokens=3_000,
        compress_threshold=0.5,
        summarization_model=FunctionModel(summarizer, model_name="gpt-4o-mini"),
    )
    agent = make_agent(reader, [middleware])
    return await read_files(agent, prompts)


async def test_a_session_costs_what_calc_price_says_summarizer_included(tmp_path: Path) -> None:
    reader, summarizer = Reader(), SummaryModel()
    await run_session(tmp_path / "messages.json", 6, reader, summarizer)
    records = await JsonHistoryStore.open(tmp_path / "messages.json").load_all()
    assert summarizer.calls >= 2, "the scenario compacts more than once"

    totals = session_costs(records)

    agent_cost = hand_price(AGENT_USAGE, "gpt-4o") * reader.calls
    summary_cost = hand_price(SUMMARY_USAGE, "gpt-4o-mini") * summarizer.calls
    assert totals.agent.requests == reader.calls
    assert totals.summarizer.requests == summarizer.calls
    assert totals.agent.cost_usd == agent_cost
    assert totals.summarizer.cost_usd == summary_cost
    assert totals.total.cost_usd is not None
    assert round(totals.total.cost_usd, 2) == round(agent_cost + summary_cost, 2)
    assert totals.total.cost_usd == agent_cost + summary_cost
    agent_in, summary_in = AGENT_USAGE.input_tokens * reader.calls, SUMMARY_USAGE.input_tokens * summarizer.calls
    assert totals.total.input_tokens == agent_in + summary_in
    assert totals.total.cache_read_tokens == AGENT_USAGE.cache_read_tokens * reader.calls
    agent_out, summary_out = AGENT_USAGE.output_tokens * reader.calls, SUMMARY_USAGE.output_tokens * summarizer.calls
    assert totals.total.output_tokens == agent_out + summary_out
    assert totals.unpriced_models == ()


async def test_each_request_counted_once_however_often_the_history_holds_it(tmp_path: Path) -> None:
    reader, summarizer = Reader(), SummaryModel()
    history = await run_session(tmp_path / "messages.json", 5, reader, summarizer)
    records = await JsonHistoryStore.open(tmp_path / "messages.json").load_all()

    twice = session_costs([*records, *records, *history])

    assert twice == session_costs(records)


async def test_compactions_record_what_they_removed_and_what_it_saved(tmp_path: Path) -> None:
    reader, summarizer = Reader(), SummaryModel()
    await run_session(tmp_path / "messages.json", 6, reader, summarizer)
    records = await JsonHistoryStore.open(tmp_path / "messages.json").load_all()
    summaries = [m for m in records if isinstance(m, ModelRequest) and is_summary_message(m)]

    totals = session_costs(records)

    assert len(totals.savings) == len(summaries) >= 2
    for saving, summary in zip(totals.savings, summaries, strict=True):
        info = summary_info(summary)
        assert info is not None
        assert saving.tokens_removed == info["tokens_before"] - info["tokens_after"] > 0
        position = records.index(summary)
        later = [m for m in records[position:] if isinstance(m, ModelResponse)]
        assert saving.later_requests == len(later)
        per_request = hand_price(RequestUsage(input_tokens=saving.tokens_removed), "gpt-4o")
        assert saving.saved_usd == per_request * len(later)
    assert totals.saved_usd == sum(s.saved_usd or 0 for s in totals.savings)
    assert totals.tokens_saved == sum(s.tokens_removed * s.later_requests for s in totals.savings)


def test_an_unknown_model_counts_tokens_and_reports_unknown_cost(caplog: pytest.LogCaptureFixture) -> None:
    usage = RequestUsage(input_tokens=100, output_tokens=10)
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("a")], usage=usage, model_name="in-house-model-v7"),
        ModelRequest(parts=[UserPromptPart("again")]),
        ModelResponse(parts=[TextPart("b")], usage=usage, model_name="in-house-model-v7"),
    ]
    with caplog.at_level(logging.WARNING, logger="summarization_pydantic_ai"):
        totals = session_costs(messages)
        session_costs(messages)

    assert totals.total.cost_usd is None
    assert totals.total.total_tokens == 220
    assert totals.total.unpriced_requests == 2
    assert totals.unpriced_models == ("in-house-model-v7",)
    assert format_cost(totals) == "unknown"
    warnings = [r for r in caplog.records if "in-house-model-v7" in r.getMessage()]
    assert len(warnings) <= 1  # one per model name per process (an earlier test may have warned already)


def test_a_mix_of_priced_and_unpriced_is_a_lower_bound_never_zero() -> None:
    usage = RequestUsage(input_tokens=1_000_000, output_tokens=0)
    known = ModelResponse(parts=[TextPart("a")], usage=usage, model_name="gpt-4o", provider_name="openai")
    unknown = ModelResponse(parts=[TextPart("b")], usage=usage, model_name="in-house-model-v7")

    totals = session_costs([known, unknown])

    assert totals.total.cost_usd is None
    assert totals.total.known_cost_usd == Decimal("2.5")
    assert format_cost(totals) == "≥ $2.50 (1 request unpriced)"


def test_overflow_retries_are_their_own_kind_and_in_the_total() -> None:
    usage = RequestUsage(input_tokens=1_000, output_tokens=100)
    normal = ModelResponse(parts=[TextPart("a")], usage=usage, model_name="gpt-4o")
    retry = ModelResponse(
        parts=[TextPart("b")], usage=usage, model_name="gpt-4o", metadata={REQUEST_KIND_KEY: "overflow_retry"}
    )

    totals = session_costs([normal, retry])

    assert totals.agent.requests == totals.overflow_retry.requests == 1
    assert totals.total.cost_usd == 2 * hand_price(usage, "gpt-4o")


def test_spend_adds_up_and_formats() -> None:
    one = Spend.of(RequestUsage(input_tokens=10, output_tokens=5), Decimal("0.01"))
    assert (one + one).total_tokens == 30
    assert (one + one).cost_usd == Decimal("0.02")
    assert format_cost(Decimal("12.345")) == "$12.35"
    assert format_cost(Decimal("0.0123")) == "$0.0123"
    assert format_cost(None) == "unknown"
    assert SUMMARIZER_USAGE_KEY.startswith("summarization_pydantic_ai.")
