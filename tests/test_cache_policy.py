"""`CachePolicy`: reductions planned by what they cost with the prompt cache counted, and the thinning a planned
reduction applies to what it keeps (superseded outputs, older bulky outputs)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from summarization_pydantic_ai import (
    SUPERSEDED_METADATA_KEY,
    THINNED_METADATA_KEY,
    CachePolicy,
    ContextConfig,
    SlidingWindowProcessor,
    count_tokens_approximately,
    measured_growth,
    supersede_outputs,
    thin_outputs,
    validate_history,
)
from summarization_pydantic_ai._cache_policy import responses_since_reduction
from summarization_pydantic_ai._sizes import Measure
from summarization_pydantic_ai.cache import CacheSimulator
from summarization_pydantic_ai.compression import MessageCompressor
from summarization_pydantic_ai.evals import BrowserSession


def _call(name: str, args: dict[str, Any], call_id: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=call_id)])


def _result(name: str, content: str, call_id: str) -> ModelRequest:
    return ModelRequest(parts=[ToolReturnPart(name, content, tool_call_id=call_id)])


def _content(part: Any) -> str:
    return part.content


# --- the policy ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"cache_read": 0}, "cache_read must be a price ratio"),
        ({"cache_write": True}, "cache_write must be a price ratio"),
        ({"limit": 1.5}, "limit must be a fraction"),
        ({"min_interval": -1}, "min_interval must be an int >= 0"),
        ({"thin_chars": 10}, "thin_chars must be an int >= 80"),
    ],
)
def test_bad_settings_are_refused_with_what_is_accepted(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CachePolicy(**settings)


def test_prices_come_from_genai_prices_per_model() -> None:
    anthropic = CachePolicy.for_model("anthropic:claude-sonnet-4-5")
    assert (anthropic.cache_read, anthropic.cache_write) == pytest.approx((0.1, 1.25))
    openai = CachePolicy.for_model("openai:gpt-4o", min_interval=5)
    assert (openai.cache_read, openai.cache_write, openai.min_interval) == (pytest.approx(0.5), 1.0, 5)
    unknown = CachePolicy.for_model("nobody:no-such-model")
    assert (unknown.cache_read, unknown.cache_write) == (0.1, 1.25)  # the write premium: the safer guess


def test_the_planned_threshold_is_the_cheapest_cycle_bounded_by_the_interval_and_the_limit() -> None:
    policy = CachePolicy(min_interval=0)
    # growth 1,000 tokens per request, 4,000 kept: cycle sqrt(2 * 1.25 * 1000 * 4000 / 0.1) = 10,000 tokens
    assert policy.trigger_tokens(trigger=5_000, low_water=4_000, growth=1_000, budget=100_000) == 14_000
    assert policy.trigger_tokens(trigger=20_000, low_water=4_000, growth=1_000, budget=100_000) == 20_000
    assert policy.trigger_tokens(trigger=5_000, low_water=4_000, growth=1_000, budget=12_000) == 11_400  # limit
    interval = CachePolicy(min_interval=20)  # at most 5 re-writes per 100 requests
    assert interval.trigger_tokens(trigger=5_000, low_water=4_000, growth=1_000, budget=100_000) == 24_000
    cheap_reads = CachePolicy(cache_read=0.5, cache_write=1.0, min_interval=0)  # OpenAI: reduce more often
    expected = 4_000 + math.sqrt(2 * 1.0 * 1_000 * 4_000 / 0.5)
    assert cheap_reads.trigger_tokens(trigger=5_000, low_water=4_000, growth=1_000, budget=100_000) == int(expected)


def test_growth_is_measured_per_request_since_the_latest_reduction() -> None:
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("go")])]
    for i in range(5):
        history += [_call("read", {"path": f"f{i}"}, f"c{i}"), _result("read", "x" * 4_000, f"c{i}")]
    growth = measured_growth(history)
    assert 1_000 < growth < 1_100  # one 4,000-character output (~1,000 tokens) and a call per request
    assert measured_growth(history[:1]) == 0.0


def test_a_sliding_window_with_a_policy_waits_past_its_trigger_until_the_limit() -> None:
    import asyncio

    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("go")])]
    for i in range(10):
        history += [_call("read", {"path": f"f{i}"}, f"c{i}"), _result("read", f"{i} " + "x" * 3_996, f"c{i}")]
    settings: dict[str, Any] = {"trigger": ("tokens", 6_000), "keep": ("tokens", 2_000), "max_tokens": 20_000}
    plain = asyncio.run(SlidingWindowProcessor(**settings)(history))
    planned = SlidingWindowProcessor(**settings, cache_policy=CachePolicy(thin=False))
    assert len(plain) < len(history), "without a policy it slides at its trigger"
    assert asyncio.run(planned(history)) is history, "~10,000 tokens: the re-write would not pay yet"
    grown = list(history)
    for i in range(10, 19):
        grown += [_call("read", {"path": f"f{i}"}, f"c{i}"), _result("read", f"{i} " + "x" * 3_996, f"c{i}")]
    out = asyncio.run(planned(grown))  # ~19,000 tokens: at the limit (95% of 20,000)
    assert len(out) < len(grown) and validate_history(out) == []


def test_a_planned_reduction_waits_min_interval_requests_after_the_previous_one() -> None:
    """Right after a reduction the growth looks small (short steps), and with a large kept part the token formula
    alone would reduce again within a few requests: `min_interval` counts requests, the limit still forces."""
    summary = ModelRequest(parts=[CompactionPart(content="The session so far. " + "x" * 12_000)])
    history: list[ModelMessage] = [summary]
    for i in range(5):
        history += [_call("ls", {"path": f"d{i}"}, f"c{i}"), _result("ls", "a.py", f"c{i}")]
    policy = CachePolicy(min_interval=20, thin=False)

    def due(messages: list[ModelMessage], budget: int) -> bool:
        size = Measure(len(messages), count_tokens_approximately(messages), budget)
        return policy.due(messages, size, ("tokens", 2_000), ("tokens", 1_000))

    assert responses_since_reduction(history) == 5 and responses_since_reduction(history[1:]) is None
    assert not due(history, 100_000), "5 requests after a reduction: not yet"
    assert due(history, 3_200), "at the limit (95% of the budget) it reduces whatever the interval"
    later = list(history)
    for i in range(5, 20):
        later += [_call("ls", {"path": f"d{i}"}, f"c{i}"), _result("ls", "a.py", f"c{i}")]
    assert due(later, 100_000), "20 requests on, the formula decides again"


# --- thinning ---------------------------------------------------------------------------------------------------


_FAILURE = "FAILED test_a - AssertionError\n1 failed"


def _reads_and_edits() -> list[ModelMessage]:
    body = "\n".join(f"line {i}: def f{i}(): return {i}" for i in range(80))
    return [
        ModelRequest(parts=[UserPromptPart("Fix a.py")]),
        _call("read_file", {"path": "a.py"}, "r1"),
        _result("read_file", body, "r1"),
        _call("read_file", {"path": "b.py"}, "r2"),
        _result("read_file", body, "r2"),
        _call("edit_file", {"path": "a.py", "old": "1", "new": "2"}, "e1"),
        _result("edit_file", "edited", "e1"),
        _call("read_file", {"path": "b.py"}, "r3"),
        _result("read_file", body, "r3"),
        _call("run_tests", {}, "t1"),
        _result(
            "run_tests", "collected 80 items\n" + "PASSED\n" * 70 + "FAILED test_a - AssertionError\n1 failed", "t1"
        ),
        _call("browser_snapshot", {}, "s1"),
        _result("browser_snapshot", "- main:\n" + "  - text: x\n" * 60, "s1"),
        _call("browser_snapshot", {}, "s2"),
        _result("browser_snapshot", "- main:\n" + "  - text: y\n" * 60, "s2"),
    ]


def _returns(messages: list[ModelMessage]) -> dict[str, ToolReturnPart]:
    return {p.tool_call_id: p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)}


def test_superseded_reads_and_snapshots_become_pointers_and_the_latest_stay() -> None:
    history = _reads_and_edits()
    out = supersede_outputs(history)
    parts = _returns(out)
    assert "read again or changed later (call e1)" in _content(parts["r1"])  # a.py was edited after the read
    assert "read again or changed later (call r3)" in _content(parts["r2"])  # b.py was read again
    assert "the later call s2 shows the current state" in _content(parts["s1"])
    for kept in ("r3", "t1", "s2", "e1"):
        assert parts[kept] is _returns(history)[kept]
    original = len(_content(_returns(history)["r1"]))
    assert parts["r1"].metadata[SUPERSEDED_METADATA_KEY] == {"by": "e1", "chars": original}  # type: ignore[index]
    assert validate_history(out) == [] and len(out) == len(history)
    assert supersede_outputs(out) is out, "idempotent"


def test_thinning_keeps_the_ends_and_the_error_lines_of_older_outputs_and_leaves_the_latest_exchange() -> None:
    history = _reads_and_edits()
    out = thin_outputs(history, max_chars=200)
    parts = _returns(out)
    log = _content(parts["t1"])
    assert log.startswith("collected 80 items") and "FAILED test_a - AssertionError" in log and "1 failed" in log
    assert THINNED_METADATA_KEY in parts["t1"].metadata  # type: ignore[operator]
    assert parts["s2"] is _returns(history)["s2"], "the latest exchange is never thinned"
    assert parts["e1"] is _returns(history)["e1"], "short outputs stay"
    assert validate_history(out) == []
    assert thin_outputs(out, max_chars=200) is out, "idempotent"


def test_a_failed_call_is_never_thinned() -> None:
    history = _reads_and_edits()
    failing = ToolReturnPart("run_tests", "Traceback\n" + "x\n" * 500, tool_call_id="t1", outcome="failed")
    history[10] = ModelRequest(parts=[failing])
    assert _returns(thin_outputs(history, max_chars=200))["t1"] is failing


# --- measured on the browser session: the planned stack against a naive one ------------------------------------


async def test_the_planned_stack_costs_less_than_rewriting_as_it_goes_with_the_cache_counted() -> None:
    """Naive: outputs compressed one request after they were sent and a slide at 80% down to half the window (the
    stack before the policy); planned: compressed as they enter, rare deep slides with thinning."""
    naive = [
        MessageCompressor(protect_latest=True),
        SlidingWindowProcessor(trigger=("fraction", 0.8), keep=("fraction", 0.5), max_tokens=32_000),
    ]
    planned = ContextConfig("sliding_window", max_tokens=32_000).processors()
    costs: dict[str, float] = {}
    rewrites: dict[str, int] = {}
    for name, steps in (("naive", naive), ("planned", planned)):
        result = await BrowserSession(turns=60).run(steps)
        assert all(validate_history(h, for_request=False) == [] for h in result.run_histories)
        billed = CacheSimulator.for_model("anthropic:claude-sonnet-4-5").simulate(result.sent)
        costs[name] = sum(float(r.cost_usd or 0) for r in billed)
        rewrites[name] = sum(r.changed_at is not None for r in billed)
    assert costs["planned"] < 0.75 * costs["naive"], costs
    assert rewrites["planned"] <= 3 < rewrites["naive"], rewrites


def _reads(count: int, start: int = 0) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for i in range(start, start + count):
        out += [_call("fetch", {"page": i}, f"c{i}"), _result("fetch", f"{i} " + "x" * 3_996, f"c{i}")]
    return out


async def test_clearing_with_a_policy_waits_for_its_batch_until_it_pays() -> None:
    from summarization_pydantic_ai import ClearToolResultsProcessor

    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("go")]), *_reads(10)]
    plain = ClearToolResultsProcessor(keep_last=2, clear_at_least=2_000)
    planned = ClearToolResultsProcessor(
        keep_last=2, clear_at_least=2_000, max_tokens=20_000, cache_policy=CachePolicy()
    )
    assert await plain(history) is not history, "without a policy a batch is cleared as soon as it reclaims enough"
    assert await planned(history) is history, "~10,000 tokens: clearing now would not pay for its re-write"
    grown = [*history, *_reads(9, start=10)]  # ~19,000 tokens: the policy's limit (95% of 20,000)
    out = await planned(grown)
    assert out is not grown and validate_history(out) == []
    assert sum("cleared" in str(p.content) for m in out for p in m.parts if isinstance(p, ToolReturnPart)) == 17


async def test_a_summarization_processor_with_a_policy_waits_then_thinning_alone_is_the_reduction() -> None:
    from summarization_pydantic_ai import SummarizationProcessor

    settings: dict[str, Any] = {"trigger": ("tokens", 6_000), "keep": ("tokens", 3_000), "max_tokens": 20_000}
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("Read the pages.")]), *_reads(10)]
    assert len(await SummarizationProcessor(None, **settings)(history)) < len(history)
    planned = SummarizationProcessor(None, **settings, cache_policy=CachePolicy())
    assert await planned(history) is history
    grown = [*history, *_reads(9, start=10)]
    out = await planned(grown)  # ~19,000 tokens: due; the thinned history fits the keep, nothing to summarize
    assert validate_history(out) == [] and len(out) == len(grown) and out is not grown
    kept = _returns(out)
    assert _content(kept["c18"]).startswith("18 ") and len(_content(kept["c18"])) == 3_999  # the latest, whole
    assert all(THINNED_METADATA_KEY in (kept[f"c{i}"].metadata or {}) for i in range(18))
    assert count_tokens_approximately(out) < count_tokens_approximately(grown) / 3
