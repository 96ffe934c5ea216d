"""Token accounting: every part kind counted, caching that stays correct, anchored/tokenizer/provider counters."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_ai.messages import (
    BinaryContent,
    CompactionPart,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai import (
    SUMMARY_METADATA_KEY,
    IncrementalCounter,
    ProviderTokenCounter,
    RequestInfo,
    TiktokenCounter,
    UsageAnchoredCounter,
    async_count_tokens,
    count_tokens_approximately,
    estimate_message_tokens,
    resolve_max_tokens,
)
from summarization_pydantic_ai._tokens import IMAGE_TOKENS


def tokens_of(*parts: Any, response: bool = False) -> int:
    message: ModelMessage = ModelResponse(parts=list(parts)) if response else ModelRequest(parts=list(parts))
    return estimate_message_tokens(message)


def test_every_part_kind_is_counted() -> None:
    base_request = tokens_of()
    base_response = tokens_of(response=True)
    text = "word " * 400  # 2,000 characters -> ~500 tokens
    for part in (
        SystemPromptPart(text),
        UserPromptPart(text),
        ToolReturnPart("t", text, tool_call_id="c"),
        ToolReturnPart("t", {"rows": [text]}, tool_call_id="c"),
        ToolReturnPart("t", [text, {"k": 1}], tool_call_id="c"),
        ToolReturnPart("t", text, tool_call_id="c", outcome="failed"),
        CompactionPart(content=text),
    ):
        assert tokens_of(part) - base_request >= 500, part
    for part in (
        TextPart(text),
        ThinkingPart(text),
        ToolCallPart("t", {"query": text}, tool_call_id="c"),
        ToolCallPart("t", '{"query": "' + text + '"}', tool_call_id="c"),
    ):
        assert tokens_of(part, response=True) - base_response >= 500, part


def test_media_use_fixed_estimates_not_their_bytes() -> None:
    image = BinaryContent(data=b"\x89PNG" + b"\0" * 500_000, media_type="image/png")
    with_image = tokens_of(UserPromptPart(["look at this", image]))
    with_url = tokens_of(UserPromptPart(["look at this", ImageUrl(url="https://example.com/a.png")]))
    plain = tokens_of(UserPromptPart(["look at this"]))
    assert with_image - plain == IMAGE_TOKENS
    assert with_url - plain == IMAGE_TOKENS


def test_request_instructions_are_counted() -> None:
    bare = ModelRequest(parts=[UserPromptPart("hi")])
    instructed = ModelRequest(parts=[UserPromptPart("hi")], instructions="x" * 4_000)
    assert estimate_message_tokens(instructed) - estimate_message_tokens(bare) == 1_000


def _history(n: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for i in range(n):
        if i % 2 == 0:
            messages.append(ModelRequest(parts=[UserPromptPart(f"question {i} " * (i % 7 + 1))]))
        else:
            messages.append(ModelResponse(parts=[TextPart(f"answer {i} " * (i % 5 + 1))]))
    return messages


def fresh_count(messages: list[ModelMessage]) -> int:
    return sum(estimate_message_tokens(m) for m in messages)


def test_incremental_counter_matches_a_fresh_count_as_the_history_grows() -> None:
    counter = IncrementalCounter()
    history = _history(101)
    for step in range(50):
        assert counter(history) == fresh_count(history)
        history = [*history, *_history(2 + step % 3)]


def test_incremental_counter_detects_a_shorter_or_replaced_history() -> None:
    counter = IncrementalCounter()
    history = _history(200)
    counter(history)
    shorter = history[:150]
    assert counter(shorter) == fresh_count(shorter)
    rewritten = [ModelRequest(parts=[UserPromptPart("summary " * 100)]), *history[150:]]
    assert counter(rewritten) == fresh_count(rewritten)


def test_verify_catches_a_replaced_middle_message() -> None:
    counter = IncrementalCounter()
    history = _history(1_000)
    counter(history)
    changed = list(history)
    changed[333] = ModelRequest(parts=[UserPromptPart("a much longer message " * 500)])
    changed.append(ModelResponse(parts=[TextPart("new")]))
    assert counter.count(changed, verify=True) == fresh_count(changed)


def test_count_tokens_approximately_is_cached_per_message() -> None:
    history = _history(50)
    first = count_tokens_approximately(history)
    assert count_tokens_approximately(history) == first == fresh_count(history)


async def test_async_count_tokens_accepts_sync_and_async_counters() -> None:
    history = _history(10)

    async def async_counter(messages: Any) -> int:
        return len(messages) * 3

    assert await async_count_tokens(async_counter, history) == 30
    assert await async_count_tokens(lambda m: 7, history) == 7
    with pytest.raises(TypeError, match="returned str"):
        await async_count_tokens(lambda m: "12", history)  # type: ignore[arg-type, return-value]
    with pytest.raises(ValueError, match="negative"):
        await async_count_tokens(lambda m: -1, history)


def _anchored_history(input_tokens: int) -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart("hello")]),
        ModelResponse(
            parts=[ToolCallPart("t", {}, tool_call_id="c1")],
            usage=RequestUsage(input_tokens=input_tokens, output_tokens=20),
        ),
        ModelRequest(parts=[ToolReturnPart("t", "y" * 400, tool_call_id="c1")]),
    ]


async def test_usage_anchored_counter_uses_the_reported_input() -> None:
    history = _anchored_history(12_345)
    counter = UsageAnchoredCounter()
    after = estimate_message_tokens(history[2])
    assert counter(history) == 12_345 + 20 + after
    request = RequestInfo(overhead_tokens=999)
    assert await counter.count_request(history, request=request, threshold=None) == 12_345 + 20 + after


async def test_usage_anchor_is_ignored_after_a_later_summary() -> None:
    history = _anchored_history(50_000)
    response = history[1]
    assert isinstance(response, ModelResponse)
    later = (response.timestamp + timedelta(seconds=5)).isoformat()
    summary = ModelRequest(
        parts=[CompactionPart(content="summary", metadata={SUMMARY_METADATA_KEY: {"created_at": later}})]
    )
    compacted = [summary, *history[1:]]
    counter = UsageAnchoredCounter()
    assert counter(compacted) == fresh_count(compacted)
    # A response that came after the summary anchors again.
    newer = ModelResponse(
        parts=[TextPart("done")],
        usage=RequestUsage(input_tokens=700, output_tokens=5),
        timestamp=datetime.now(UTC) + timedelta(seconds=60),
    )
    grown = [*compacted, newer, ModelRequest(parts=[UserPromptPart("next")])]
    assert counter(grown) == 705 + estimate_message_tokens(grown[-1])


def test_tiktoken_counter_works_offline() -> None:
    counter = TiktokenCounter()
    history = [ModelRequest(parts=[UserPromptPart("hello world " * 1_000)])]
    count = counter(history)
    # "hello world " is 2 tokens per repetition in o200k; structure overhead is small.
    assert 2_000 <= count <= 2_050
    long = [ModelRequest(parts=[UserPromptPart("z" * 300_000)])]
    assert counter(long) > 10_000  # long inputs are chunked, not refused


class CountingModel:
    """Stands in for a model with `count_tokens`."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.calls = 0

    async def count_tokens(self, messages: Any, settings: Any, params: Any) -> RequestUsage:
        self.calls += 1
        return RequestUsage(input_tokens=self.value)


async def test_provider_counter_is_asked_only_near_the_threshold() -> None:
    model = CountingModel(value=90_000)
    counter = ProviderTokenCounter(model=model, near=0.8)
    history = _history(10)
    request = RequestInfo(model_request_parameters=object())
    estimate = await counter.count_request(history, request=request, threshold=100_000)
    assert model.calls == 0 and estimate < 1_000
    near = await counter.count_request(history, request=request, threshold=estimate + 10)
    assert model.calls == 1 and near == 90_000


async def test_provider_counter_falls_back_when_unsupported(caplog: pytest.LogCaptureFixture) -> None:
    class NoCount:
        async def count_tokens(self, *args: Any) -> RequestUsage:
            raise NotImplementedError

    counter = ProviderTokenCounter(model=NoCount())
    history = _history(4)
    request = RequestInfo(model_request_parameters=object())
    with caplog.at_level(logging.WARNING):
        value = await counter.count_request(history, request=request, threshold=1)
    assert value == fresh_count(history)
    assert "count_tokens" in caplog.text


def test_resolve_max_tokens_reports_genai_prices_numbers() -> None:
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    for name in ("openai:gpt-4.1", "anthropic:claude-sonnet-4-5", "openai:gpt-4o"):
        provider, model = name.split(":")
        _, info = snapshot.find_provider_model(model, None, provider, None)
        assert resolve_max_tokens(name) == info.context_window
    assert resolve_max_tokens("openai:gpt-4o") == 128_000
    assert resolve_max_tokens("anthropic:claude-sonnet-4-5") == 200_000


def test_resolve_max_tokens_unknown_is_none_and_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="summarization_pydantic_ai"):
        assert resolve_max_tokens("openai:no-such-model-xyz") is None
        assert resolve_max_tokens("openai:no-such-model-xyz") is None
    assert caplog.text.count("no-such-model-xyz") == 1


def test_resolve_max_tokens_accepts_a_model_object_and_rejects_garbage() -> None:
    class FakeModel:
        system = "openai"
        model_name = "gpt-4o"

    assert resolve_max_tokens(FakeModel()) == 128_000
    with pytest.raises(TypeError, match="model name"):
        resolve_max_tokens(42)


def test_replaced_message_objects_are_counted_anew() -> None:
    history = _history(20)
    before = count_tokens_approximately(history)
    first = history[0]
    assert isinstance(first, ModelRequest)
    history[0] = replace(first, parts=[UserPromptPart("much longer now " * 100)])
    assert IncrementalCounter().count(history) == fresh_count(history) != before


_ARGS: list[Any] = [
    None,
    {},
    "raw json text",
    {"path": "src/app.py", "start": 1, "end": 200},
    {"query": 'say "hi"\\n', "flag": True, "off": False, "none": None, "ratio": 0.25, "big": 10**30},
    {"nested": {"list": [1, "two", [3.5, None]], "empty": [], "inner": {}}, "tab": "a\tb", "uni": "é😀\u2028"},
    {1: "int key"},
    {"inf": float("inf"), "nan": float("nan")},
    {"obj": object()},
    [1, 2, {"a": "b"}],
]


@pytest.mark.parametrize("args", _ARGS, ids=range(len(_ARGS)))
def test_the_fast_estimate_equals_the_reference_for_any_arguments(args: Any) -> None:
    from summarization_pydantic_ai._estimate import approx_message_tokens

    call = ModelResponse(parts=[TextPart("Reading."), ToolCallPart("read_file", args, tool_call_id="c")])
    result = ModelRequest(
        parts=[ToolReturnPart("read_file", args if isinstance(args, dict | str) else str(args), tool_call_id="c")],
        instructions="Be brief.",
    )
    for message in (call, result):
        assert approx_message_tokens(message) == estimate_message_tokens(message)


def test_the_fast_estimate_equals_the_reference_on_every_part_kind() -> None:
    from summarization_pydantic_ai._estimate import approx_message_tokens, approx_messages_tokens

    history = _history(300)
    history.append(
        ModelRequest(
            parts=[
                SystemPromptPart("sys"),
                UserPromptPart(["look", ImageUrl("https://x/y.png")]),
                ToolReturnPart("t", [1, "a"], tool_call_id="z"),
            ]
        )
    )
    history.append(ModelResponse(parts=[ThinkingPart("hmm"), CompactionPart(None), TextPart("")]))
    assert [approx_message_tokens(m) for m in history] == [estimate_message_tokens(m) for m in history]
    assert approx_messages_tokens(history) == [estimate_message_tokens(m) for m in history]  # the batch form


def test_an_edit_in_place_is_re_measured_anywhere_in_the_history() -> None:
    counter = IncrementalCounter()
    history = _history(2_000)
    counter(history)
    for index in (0, 7, 1_000, 1_999):
        message = history[index]
        history[index] = replace(message, parts=[TextPart("edited " * (index + 50))])  # type: ignore[arg-type, list-item]
        assert counter(history) == fresh_count(history)  # no verify needed: the whole prefix is compared
    mutated = history[-3]
    mutated.parts = [*mutated.parts, TextPart("more " * 100)]  # type: ignore[list-item]  # the same object
    assert counter(history) == fresh_count(history)
    deep = history[500]
    deep.parts = [TextPart("changed deep in the history " * 30)]  # type: ignore[list-item]
    assert counter.count(history, verify=True) == fresh_count(history)
