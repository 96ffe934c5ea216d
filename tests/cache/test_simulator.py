"""The simulator as a session uses it: incremental, told rewrites apart from growth, beside the provider's usage."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai.cache import (
    AnthropicPromptCache,
    CachedRequest,
    CacheReport,
    CacheSimulator,
    OpenAIPromptCache,
    PromptCache,
    SentRequest,
    cache_prices,
    rewrite_cost,
)

from ._sessions import answer, at, conversation, send, simulator, sized, tokens_of


def test_add_measures_only_the_new_messages():
    measured: list[ModelMessage] = []

    def counting(message: ModelMessage) -> int:
        measured.append(message)
        return tokens_of(message)

    sim = CacheSimulator(AnthropicPromptCache(model="claude-sonnet-4-5"), message_tokens=counting)
    history = conversation(50)
    for turn in range(50):
        sim.add(send(history(turn), turn))
    assert len(measured) == len(history(49))  # each message measured once, however many requests repeat it


def test_simulate_equals_adding_one_by_one():
    history = conversation(6, size=1500)
    requests = [send(history(turn), 30 * turn) for turn in range(6)]
    cache = AnthropicPromptCache(model="claude-sonnet-4-5")
    batch = simulator(cache, "anthropic:claude-sonnet-4-5").simulate(requests)
    one_by_one = simulator(cache, "anthropic:claude-sonnet-4-5")
    assert [one_by_one.add(request) for request in requests] == batch


def test_a_rewrite_in_the_middle_is_written_again_and_reported():
    history = conversation(6, size=2000)
    sim = simulator(
        AnthropicPromptCache(model="claude-sonnet-4-5", cache_instructions=True), "anthropic:claude-sonnet-4-5"
    )
    last = [sim.add(send(history(turn), 10 * turn, "rules|3000")) for turn in range(6)][-1]
    assert last.changed_at is None and last.cache_read_tokens == 3000 + 2000 * 9
    rewritten = list(history(5))
    rewritten[2] = sized("q1 (cleared)", 10)
    result = sim.add(send(rewritten, 60, "rules|3000"))
    assert result.changed_at == 2
    assert result.established_tokens == 3000 + 2000 * 11
    # Anthropic keeps entries at breakpoints only: the one before the cut is the first request's (instructions and
    # the first question); everything after it is written again.
    assert result.cache_read_tokens == 3000 + 2000
    assert result.cache_write_tokens == 2000 * 9 + 10
    assert result.missed_tokens == 3000 + 2000 * 11 - 5000


def test_the_same_content_in_new_objects_with_new_timestamps_still_hits():
    sim = simulator(OpenAIPromptCache())
    sim.add(send([sized("doc", 3000), sized("q", 10)]))
    again = [sized("doc", 3000), sized("q", 10)]
    again[0] = dataclasses.replace(again[0], timestamp=at(999), run_id="another run")
    assert sim.add(send(again, 5)).cache_read_tokens == 2944  # 3,010 tokens in whole 128-token steps


def test_changed_instructions_or_tools_rewrite_everything():
    messages = [sized("doc", 3000)]
    sim = simulator(PromptCache(write_premium=True))
    sim.add(send(messages, 0, "rules v1|100"))
    changed = sim.add(send(messages, 1, "rules v2|100"))
    assert (changed.changed_at, changed.cache_read_tokens) == (-1, 0)
    tool = ToolDefinition(name="read_file", description="Read a file", parameters_json_schema={"type": "object"})
    sim.add(SentRequest(messages, instructions="rules v2|100", tool_definitions=[tool], timestamp=at(2)))
    same_tool = ToolDefinition(name="read_file", description="Read a file", parameters_json_schema={"type": "object"})
    result = sim.add(SentRequest(messages, instructions="rules v2|100", tool_definitions=[same_tool], timestamp=at(3)))
    assert result.changed_at is None  # equal definitions in new objects: the same prefix
    assert result.cache_read_tokens == result.input_tokens


def test_provider_usage_is_shown_and_the_prediction_kept_beside_it():
    sim = simulator(AnthropicPromptCache(model="claude-sonnet-4-5"), "anthropic:claude-sonnet-4-5")
    history = conversation(3, size=2000)
    sim.add(send(history(0)))
    sim.add(send(history(1), 10))
    usage = RequestUsage(input_tokens=10_100, cache_read_tokens=5_900, cache_write_tokens=4_100, output_tokens=80)
    result = sim.add(dataclasses.replace(send(history(2), 20), usage=usage))
    assert result.source == "reported"
    assert (result.cache_read_tokens, result.cache_write_tokens, result.uncached_tokens) == (5_900, 4_100, 100)
    assert (result.predicted.cache_read_tokens, result.predicted.cache_write_tokens) == (6_000, 4_000)
    prices = cache_prices("anthropic:claude-sonnet-4-5")
    assert prices is not None
    assert result.cost_usd == prices.cost(uncached=100, cache_read=5_900, cache_write=4_100, output=80)
    report = sim.report()
    assert (report.reported_requests, report.reported.cache_read_tokens) == (1, 5_900)
    assert report.predicted_on_reported.cache_read_tokens == 6_000


def test_usage_without_input_is_not_taken_as_reported():
    sim = simulator(OpenAIPromptCache())
    result = sim.add(dataclasses.replace(send([sized("q", 10)]), usage=RequestUsage(output_tokens=5)))
    assert (result.source, result.output_tokens) == ("estimated", 5)


def test_report_totals_and_cache_read_share():
    history = conversation(4, size=2000)
    sim = simulator(AnthropicPromptCache(model="claude-sonnet-4-5"), "anthropic:claude-sonnet-4-5")
    results = sim.simulate(send(history(turn), turn) for turn in range(4))
    report = CacheReport.of(results)
    assert report == sim.report()
    assert report.tokens.cache_read_tokens == 2000 + 6000 + 10000
    assert report.input_tokens == 2000 + 6000 + 10000 + 14000
    assert report.cache_read_share == pytest.approx(18000 / 32000)
    assert report.cost_usd == sum((r.cost_usd or Decimal(0)) for r in results)
    assert report.rewrites == 0


def test_unpriced_model_costs_are_unknown_not_zero():
    result = simulator(OpenAIPromptCache()).add(send([sized("q", 10)]))
    assert result.cost_usd is None
    assert CacheReport.of([result]).cost_usd is None


def test_rewrite_cost_of_a_planned_cut():
    history = conversation(4, size=1000)
    sim = simulator(AnthropicPromptCache(model="claude-sonnet-4-5"), "anthropic:claude-sonnet-4-5")
    for turn in range(4):
        sim.add(send(history(turn), turn))
    assert sim.tokens_after(3) == 4000
    prices = cache_prices("anthropic:claude-sonnet-4-5")
    assert prices is not None
    assert sim.rewrite_cost_at(3) == rewrite_cost(prices, 4000) == 4000 * (prices.cache_write - prices.cache_read)
    with pytest.raises(IndexError, match="outside"):
        sim.tokens_after(8)
    with pytest.raises(ValueError, match="negative"):
        rewrite_cost(prices, -1)


def test_tool_returns_count_like_any_message():
    sim = simulator(OpenAIPromptCache())
    call = ModelRequest(parts=[ToolReturnPart("read_file", "contents|5000", tool_call_id="c1")])
    sim.add(send([sized("q", 10), answer("call", 10), call]))
    assert sim.add(send([sized("q", 10), answer("call", 10), call], 1)).cache_read_tokens == 4992


# -- the simulator against a plain reference: the longest live identical prefix ------------------------------------

_RETENTION = timedelta(seconds=100)


def _reference(histories: list[tuple[list[str], int]]) -> list[int]:
    """Every prefix of every request is an entry that lives `_RETENTION` after its last write or read."""
    last_use: dict[tuple[str, ...], int] = {}
    reads: list[int] = []
    for texts, now in histories:
        read = 0
        for length in range(len(texts), 0, -1):
            used = last_use.get(tuple(texts[:length]))
            if used is not None and now - used <= _RETENTION.total_seconds():
                read = length
                break
        for length in range(1, len(texts) + 1):
            last_use[tuple(texts[:length])] = now
        reads.append(read * 100)
    return reads


def _replay(plans: list[tuple[list[str], int]]) -> tuple[CacheSimulator, list[CachedRequest]]:
    """The plans through a cache of every prefix (100 tokens a message); one message object per text."""
    sim = CacheSimulator(
        PromptCache(retention=_RETENTION, write_premium=True), message_tokens=lambda m: 100, text_tokens=lambda t: 0
    )
    messages: dict[str, ModelMessage] = {}
    results = [
        sim.add(
            SentRequest(
                [messages.setdefault(t, ModelRequest(parts=[UserPromptPart(t)])) for t in texts],
                instructions="",
                timestamp=at(when),
            )
        )
        for texts, when in plans
    ]
    return sim, results


_steps = st.lists(
    st.tuples(st.sampled_from(["append", "rewrite", "truncate", "fork"]), st.integers(0, 30), st.integers(0, 150)),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(_steps)
def test_reads_match_the_longest_live_prefix_reference(steps: list[tuple[str, int, int]]):
    texts: list[str] = ["m0"]
    saved: list[str] = list(texts)
    now, plans = 0, []
    for counter, (action, where, gap) in enumerate(steps, 1):
        now += gap
        if action == "append":
            texts = [*texts, f"m{counter}"]
        elif action == "rewrite" and texts:
            texts = [*texts[: where % len(texts)], f"r{counter}", *texts[where % len(texts) + 1 :]]
        elif action == "truncate":
            texts = texts[: max(1, where % (len(texts) + 1))]
        else:
            saved, texts = texts, list(saved)  # back to an earlier branch
        plans.append((list(texts), now))
    _, results = _replay(plans)
    assert [r.cache_read_tokens for r in results] == _reference(plans)
    for result, (texts, _) in zip(results, plans, strict=True):
        assert result.input_tokens == 100 * len(texts)
        assert result.cache_write_tokens == result.input_tokens - result.cache_read_tokens


# -- what a rewrite removed and what it made the cache write again -------------------------------------------------


def _anthropic_session(turns: int) -> tuple[CacheSimulator, list[ModelMessage]]:
    sim = simulator(AnthropicPromptCache(model="claude-sonnet-4-5"), "anthropic:claude-sonnet-4-5")
    history = conversation(turns, size=2000)
    for turn in range(turns):
        sim.add(send(history(turn), 10 * turn))
    return sim, history(turns - 1)


def test_compressing_an_output_already_sent_removes_little_and_rewrites_everything_after_it():
    sim, messages = _anthropic_session(6)  # 11 messages of 2,000 tokens
    compressed = list(messages)
    compressed[4] = sized("q2 (compressed)", 200)
    grown = [*compressed, answer("a6", 2000), sized("q6", 2000)]
    result = sim.add(send(grown, 100))
    assert (result.changed_at, result.tokens_removed) == (4, 1800)
    # Read: the entry before the cut (the second request's); written again: from there to the end of the
    # old context, 1,800 tokens smaller, that would have been read.
    assert result.cache_read_tokens == 2000 * 3
    assert result.rewrite_tokens == 2000 * 11 - 1800 - 2000 * 3
    assert result.cache_write_tokens == result.rewrite_tokens + 4000  # and the two new messages


def test_a_compaction_removes_what_its_summary_replaced():
    sim, messages = _anthropic_session(6)
    summary = sized("summary of the first 7 messages", 500)
    compacted = [summary, *messages[7:], answer("a6", 2000), sized("q6", 2000)]
    result = sim.add(send(compacted, 100))
    assert (result.changed_at, result.tokens_removed) == (0, 7 * 2000 - 500)
    assert result.cache_read_tokens == 0
    assert result.rewrite_tokens == 500 + 4 * 2000


def test_a_rewrite_after_the_cache_expired_costs_no_rewrite():
    sim, messages = _anthropic_session(6)
    compressed = [*messages[:4], sized("q2 (compressed)", 200), *messages[5:]]
    result = sim.add(send(compressed, 10 * 60))  # ten minutes later: the 5-minute entries are gone anyway
    assert (result.changed_at, result.tokens_removed, result.rewrite_tokens) == (4, 1800, 0)


def test_a_history_that_only_grew_reports_no_rewrite():
    sim, messages = _anthropic_session(3)
    result = sim.add(send([*messages, answer("a", 10), sized("q", 10)], 40))
    assert (result.changed_at, result.tokens_removed, result.rewrite_tokens) == (None, 0, 0)


def test_a_long_session_forgets_dead_entries_and_still_reads_what_is_alive():
    plans: list[tuple[list[str], int]] = []
    now = 0
    for request in range(2000):  # every fourth request starts over: its old branch dies after the retention
        now += 60 if request % 7 else 150
        base = f"b{request // 4}"
        plans.append(([base, *(f"{base}.{k}" for k in range(request % 4 + 1))], now))
    sim, results = _replay(plans)
    assert [r.cache_read_tokens for r in results] == _reference(plans)
    assert len(sim._entries.entries) <= 2 * 7 + 1024 + 7  # pyright: ignore[reportPrivateUsage]
