"""The providers' published caching rules and examples, reproduced exactly by the simulator."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from pydantic_ai.messages import CachePoint, ModelRequest, UserPromptPart

from summarization_pydantic_ai.cache import (
    AnthropicPromptCache,
    DeepSeekPromptCache,
    GooglePromptCache,
    NoPromptCache,
    OpenAIPromptCache,
    cache_prices,
    prompt_cache_for,
    rewrite_cost,
)

from ._sessions import answer, conversation, send, simulator, sized

# -- Anthropic ---------------------------------------------------------------------------------------------------


def test_anthropic_published_example_long_system_prompt_is_written_then_read():
    # Anthropic's guide: a book in the system prompt with `cache_control`, a 21-token question. First call:
    # cache_creation_input_tokens=188086, input_tokens=21; second call: cache_read_input_tokens=188086.
    cache = AnthropicPromptCache(model="claude-opus-4", cache_messages=False, cache_instructions=True)
    sim = simulator(cache, "anthropic:claude-opus-4-0")
    book = "Pride and Prejudice ...|188086"
    first = sim.add(send([sized("Analyze the major themes", 21)], 0, book))
    second = sim.add(send([sized("Analyze the characters", 21)], 30, book))
    assert (first.cache_write_tokens, first.cache_read_tokens, first.uncached_tokens) == (188086, 0, 21)
    assert (second.cache_write_tokens, second.cache_read_tokens, second.uncached_tokens) == (0, 188086, 21)
    prices = cache_prices("anthropic:claude-opus-4-0")
    assert prices is not None
    assert first.cost_usd == 188086 * prices.cache_write + 21 * prices.input
    assert second.cost_usd == 188086 * prices.cache_read + 21 * prices.input


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-opus-4-5", "claude-haiku-4-5"])
def test_anthropic_prices_come_from_genai_prices_with_the_published_multipliers(model: str):
    prices = cache_prices(f"anthropic:{model}")
    assert prices is not None and prices.derived == ()
    assert prices.write_multiplier == Decimal("1.25")
    assert prices.cache_write_1h == 2 * prices.input
    assert prices.read_multiplier == Decimal("0.1")


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-sonnet-4-5", 1024),
        ("claude-opus-4-1", 1024),
        ("claude-opus-4-5", 4096),
        ("claude-opus-4-6", 4096),
        ("claude-haiku-4-5", 4096),
        ("claude-opus-4-7", 2048),
        ("claude-3-haiku-20240307", 2048),
        ("claude-opus-5", 512),
    ],
)
def test_anthropic_minimum_cacheable_length_per_model(model: str, minimum: int):
    cache = AnthropicPromptCache(model=model)
    assert cache.min_cacheable_tokens == minimum
    sim = simulator(cache)
    below = sim.add(send([sized("q", minimum - 1)]))
    assert (below.cache_write_tokens, below.uncached_tokens) == (0, minimum - 1)  # processed without caching
    at_minimum = simulator(cache).add(send([sized("q", minimum)]))
    assert at_minimum.cache_write_tokens == minimum


def test_anthropic_automatic_caching_reads_the_previous_turn_and_writes_the_new_one():
    history = conversation(4)
    sim = simulator(AnthropicPromptCache(model="claude-sonnet-4-5"))
    results = [sim.add(send(history(turn), 60 * turn)) for turn in range(4)]
    assert [(r.cache_read_tokens, r.cache_write_tokens, r.uncached_tokens) for r in results] == [
        (0, 0, 1000),  # 1,000 tokens: under Sonnet's 1,024 minimum
        (0, 3000, 0),
        (3000, 2000, 0),
        (5000, 2000, 0),
    ]


def test_anthropic_five_minute_entries_expire_one_hour_entries_do_not():
    history = conversation(3, size=2000)
    for ttl, expected_read in (("5m", 0), ("1h", 2000 * 3)):
        sim = simulator(AnthropicPromptCache(model="claude-sonnet-4-5", ttl_messages=ttl))  # type: ignore[arg-type]
        sim.add(send(history(1), 0))
        late = sim.add(send(history(2), 30 * 60))  # 30 minutes later
        assert late.cache_read_tokens == expected_read
        assert late.cache_write_1h_tokens == (late.cache_write_tokens if ttl == "1h" else 0)


def test_anthropic_a_read_refreshes_the_entry():
    history = conversation(5, size=2000)
    sim = simulator(AnthropicPromptCache(model="claude-sonnet-4-5"))
    sim.add(send(history(1), 0))
    for turn, seconds in ((2, 240), (3, 480), (4, 720)):  # 4 minutes apart: 12 minutes after the first write
        assert sim.add(send(history(turn), seconds)).cache_read_tokens == 2000 * (2 * turn - 1)


def test_anthropic_one_hour_write_costs_twice_the_input_price():
    sim = simulator(AnthropicPromptCache(model="claude-sonnet-4-5", ttl_messages="1h"), "anthropic:claude-sonnet-4-5")
    result = sim.add(send([sized("q", 10_000)]))
    prices = cache_prices("anthropic:claude-sonnet-4-5")
    assert prices is not None
    assert result.cache_write_1h_tokens == 10_000
    assert result.cost_usd == 10_000 * 2 * prices.input


def test_anthropic_lookback_of_twenty_blocks_misses_an_entry_further_back():
    # One turn that adds 21 tool-result blocks: the entry the previous request left is out of reach from the
    # new last-message breakpoint, so everything is written again; with the instructions cached, the head is read.
    many = ModelRequest(parts=[UserPromptPart(f"r{i}|100") for i in range(21)])
    for cache_instructions, read in ((False, 0), (True, 5000)):
        cache = AnthropicPromptCache(model="claude-sonnet-4-5", cache_instructions=cache_instructions)
        sim = simulator(cache)
        start = [sized("q", 2000)]
        sim.add(send(start, 0, "rules|5000"))
        result = sim.add(send([*start, answer("a", 10), many], 10, "rules|5000"))
        assert result.cache_read_tokens == read
        assert result.input_tokens == 5000 + 2000 + 10 + 2100


def test_anthropic_cache_point_in_a_user_prompt_is_a_breakpoint():
    document = ModelRequest(parts=[UserPromptPart(["document|3000", CachePoint()])])
    cache = AnthropicPromptCache(model="claude-sonnet-4-5", cache_messages=False)
    sim = simulator(cache)
    first = sim.add(send([document, answer("a", 10), sized("q1", 20)], 0))
    second = sim.add(send([document, answer("a", 10), sized("q2", 20)], 10))
    assert (first.cache_write_tokens, first.uncached_tokens) == (3000, 30)
    assert (second.cache_read_tokens, second.uncached_tokens) == (3000, 30)


def test_anthropic_settings_map_to_breakpoints():
    cache = AnthropicPromptCache.from_settings(
        {"anthropic_cache": "1h", "anthropic_cache_instructions": True}, model="claude-sonnet-4-5"
    )
    assert (cache.cache_messages, cache.ttl_messages, cache.cache_instructions) == (True, "1h", True)
    assert not AnthropicPromptCache.from_settings({}).cache_messages


# -- OpenAI ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("prefix", "read"), [(1000, 0), (1024, 1024), (1151, 1024), (1152, 1152), (1500, 1408)])
def test_openai_caches_from_1024_tokens_in_128_token_steps(prefix: int, read: int):
    sim = simulator(OpenAIPromptCache())
    sim.add(send([sized("document", prefix), sized("q1", 10)]))
    second = sim.add(send([sized("document", prefix), sized("q2", 10)], 60))
    assert second.cache_read_tokens == read
    assert second.cache_write_tokens == 0  # no write fee: the rest is plain input
    assert second.uncached_tokens == prefix + 10 - read


def test_openai_prices_reads_at_the_cached_input_price_and_writes_nothing_extra():
    prices = cache_prices("openai:gpt-4.1")
    assert prices is not None
    assert prices.cache_read == prices.input / 4  # $0.50 against $2.00 per million
    sim = simulator(OpenAIPromptCache(), "openai:gpt-4.1")
    sim.add(send([sized("doc", 4096), sized("q", 4)]))
    second = sim.add(send([sized("doc", 4096), sized("q", 4)], 30))
    assert (second.cache_read_tokens, second.uncached_tokens) == (4096, 4)
    assert second.cost_usd == 4096 * prices.cache_read + 4 * prices.input
    assert rewrite_cost(prices, 1000, write_premium=False) == 1000 * (prices.input - prices.cache_read)


# -- Google ------------------------------------------------------------------------------------------------------


def test_google_implicit_cache_minimum_per_model():
    assert GooglePromptCache(model="gemini-2.5-flash").min_cacheable_tokens == 2048
    assert GooglePromptCache(model="gemini-3-pro-preview").min_cacheable_tokens == 4096
    sim = simulator(GooglePromptCache(model="gemini-2.5-pro"))
    sim.add(send([sized("doc", 3000), sized("q1", 10)]))
    second = sim.add(send([sized("doc", 3000), sized("q2", 10)], 10))
    assert (second.cache_read_tokens, second.cache_write_tokens, second.uncached_tokens) == (3000, 0, 10)


# -- DeepSeek ----------------------------------------------------------------------------------------------------


def test_deepseek_multi_turn_example_reads_the_first_request_and_its_answer():
    # DeepSeek's example: the second request repeats the first request and its answer, then asks again.
    system, first_question = sized("system", 10), sized("capital of China?", 10)
    sim = simulator(DeepSeekPromptCache())
    sim.add(send([system, first_question]))
    second = sim.add(send([system, first_question, answer("Beijing", 5), sized("capital of the US?", 10)], 5))
    assert second.cache_read_tokens == 25  # the request unit and the answer unit it ended with
    assert second.uncached_tokens == 10


def test_deepseek_common_prefix_is_hit_only_from_the_third_request():
    # A + B, then A + C: no unit matches (A + B is a unit, A is not yet). A is then persisted: A + D hits it.
    a = sized("financial report", 2000)
    sim = simulator(DeepSeekPromptCache())
    sim.add(send([a, sized("summarize", 10)]))
    second = sim.add(send([a, sized("profitability", 10)], 5))
    third = sim.add(send([a, sized("risks", 10)], 10))
    assert second.cache_read_tokens == 0
    assert third.cache_read_tokens == 2000
    assert cache_prices("deepseek:deepseek-chat") is not None


# -- families ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("anthropic:claude-sonnet-4-5", AnthropicPromptCache),
        ("claude-haiku-4-5", AnthropicPromptCache),
        ("bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0", AnthropicPromptCache),
        ("openrouter:anthropic/claude-opus-4-5", AnthropicPromptCache),
        ("openai:gpt-4.1", OpenAIPromptCache),
        ("openai-responses:o3", OpenAIPromptCache),
        ("google-gla:gemini-2.5-flash", GooglePromptCache),
        ("deepseek:deepseek-chat", DeepSeekPromptCache),
        ("mistral:mistral-large-latest", NoPromptCache),
    ],
)
def test_prompt_cache_for_picks_the_family(name: str, family: type):
    assert type(prompt_cache_for(name)) is family


def test_prompt_cache_for_passes_options_and_model():
    cache = prompt_cache_for("anthropic:claude-opus-4-5", ttl_messages="1h", retention=timedelta(hours=1))
    assert isinstance(cache, AnthropicPromptCache)
    assert (cache.min_cacheable_tokens, cache.ttl_messages) == (4096, "1h")


def test_no_prompt_cache_sends_everything_uncached():
    sim = simulator(NoPromptCache())
    sim.add(send([sized("doc", 5000)]))
    second = sim.add(send([sized("doc", 5000)], 1))
    assert (second.cache_read_tokens, second.cache_write_tokens, second.uncached_tokens) == (0, 0, 5000)


def test_unknown_model_has_no_prices():
    assert cache_prices("nowhere:no-such-model-xyz") is None


def test_a_request_past_a_price_tier_is_priced_by_genai_prices_tiers():
    from genai_prices import Usage, calc_price

    prices = cache_prices("anthropic:claude-sonnet-4-5")
    assert prices is not None
    for uncached, read, write in ((1000, 50_000, 2000), (10_000, 250_000, 5000)):
        usage = Usage(input_tokens=uncached + read + write, cache_read_tokens=read, cache_write_tokens=write)
        expected = calc_price(usage, "claude-sonnet-4-5", provider_id="anthropic").total_price
        assert prices.cost(uncached=uncached, cache_read=read, cache_write=write) == expected
