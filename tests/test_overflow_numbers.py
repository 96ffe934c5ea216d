"""Reading the provider's numbers from an overflow error, and sizing the retry from them."""

from __future__ import annotations

import json

import pytest
from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError

from summarization_pydantic_ai.context_manager._overflow_numbers import (
    BLIND_SHRINK,
    SAFETY_MARGIN,
    ProviderNumbers,
    overflow_target,
    parse_overflow,
)

WORDINGS = [
    (  # OpenAI chat completions
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
        "Please reduce the length of the messages.",
        ProviderNumbers(prompt_tokens=130512, limit=128000),
    ),
    (  # OpenAI with max_tokens, DeepSeek, vLLM
        "This model's maximum context length is 8192 tokens. However, you requested 8500 tokens (7500 in the "
        "messages, 1000 in the completion). Please reduce the length of the messages or completion.",
        ProviderNumbers(prompt_tokens=7500, limit=8192, output_tokens=1000),
    ),
    ("prompt is too long: 187254 tokens > 200000 maximum", ProviderNumbers(prompt_tokens=187254, limit=200000)),
    (
        "input length and `max_tokens` exceed context limit: 187254 + 20000 > 200000, decrease input length or "
        "`max_tokens` and try again",
        ProviderNumbers(prompt_tokens=187254, limit=200000, output_tokens=20000),
    ),
    (  # Gemini
        "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).",
        ProviderNumbers(prompt_tokens=1234567, limit=1048576),
    ),
    (  # Mistral
        "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
        ProviderNumbers(prompt_tokens=40000, limit=32768),
    ),
    (  # xAI
        "This model's maximum prompt length is 131072 but the request contains 150000 tokens.",
        ProviderNumbers(prompt_tokens=150000, limit=131072),
    ),
    (  # vLLM (newer)
        "This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens.",
        ProviderNumbers(prompt_tokens=40000, limit=32768),
    ),
    (  # llama.cpp
        "request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it",
        ProviderNumbers(prompt_tokens=5000, limit=4096),
    ),
    (  # Cohere
        "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 5000.",
        ProviderNumbers(prompt_tokens=5000, limit=4081),
    ),
    ("prompt is too long: 1,048,577 tokens > 1,048,576 maximum", ProviderNumbers(1048577, 1048576)),
    ("Your input exceeds the context window of this model. Please adjust your input.", ProviderNumbers()),
    ("Input is too long for requested model.", ProviderNumbers()),
]


@pytest.mark.parametrize(("message", "expected"), WORDINGS)
def test_the_numbers_of_each_wording_are_read(message: str, expected: ProviderNumbers) -> None:
    assert parse_overflow(ModelContextWindowExceededError("some-model", message)) == expected


def test_the_numbers_are_read_from_an_http_error_body_in_any_form() -> None:
    message = "prompt is too long: 208310 tokens > 200000 maximum"
    nested = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    for body in (nested, json.dumps(nested), json.dumps(nested).encode()):
        error = ModelHTTPError.for_category(ModelContextWindowExceededError, status_code=400, model_name="m", body=body)
        assert parse_overflow(error) == ProviderNumbers(prompt_tokens=208310, limit=200000)


def test_the_status_code_and_model_name_are_not_taken_for_sizes() -> None:
    error = ModelHTTPError.for_category(
        ModelContextWindowExceededError, status_code=400, model_name="gpt-4-32k", body={"message": "too long"}
    )
    assert parse_overflow(error) == ProviderNumbers()


@pytest.mark.parametrize(
    "numbers",
    [
        ProviderNumbers(prompt_tokens=130_512, limit=128_000),
        ProviderNumbers(prompt_tokens=187_254, limit=200_000, output_tokens=20_000),
        ProviderNumbers(prompt_tokens=40_000, limit=32_768),
    ],
)
@pytest.mark.parametrize("estimate", [20_000, 100_000, 400_000])
def test_the_retry_fits_the_providers_window_with_the_margin_in_its_own_tokens(
    numbers: ProviderNumbers, estimate: int
) -> None:
    assert numbers.prompt_tokens is not None and numbers.limit is not None
    target = overflow_target(estimate, 10_000_000, numbers)
    ratio = numbers.prompt_tokens / estimate  # how far our counter was off
    room = (numbers.limit - (numbers.output_tokens or 0)) * (1 - SAFETY_MARGIN)
    assert target < estimate
    assert target * ratio <= room  # in the provider's tokens, the retry fits with the margin
    assert (target + 1) * ratio > room  # and no more is cut than that


def test_our_budget_caps_the_target() -> None:
    numbers = ProviderNumbers(prompt_tokens=300_000, limit=200_000)
    assert overflow_target(250_000, 100_000, numbers) == int(100_000 * (1 - SAFETY_MARGIN))


@pytest.mark.parametrize(
    "numbers",
    [ProviderNumbers(), ProviderNumbers(limit=200_000), ProviderNumbers(prompt_tokens=5_000)],
    ids=["none", "limit-only", "prompt-only"],
)
def test_without_both_numbers_the_retry_shrinks_blindly(numbers: ProviderNumbers) -> None:
    assert overflow_target(10_000, 200_000, numbers) == int(10_000 * BLIND_SHRINK)


def test_numbers_that_contradict_the_rejection_shrink_blindly() -> None:
    # A prompt that the stated window would hold: the numbers cannot say how much to cut.
    numbers = ProviderNumbers(prompt_tokens=1_000, limit=200_000)
    assert overflow_target(1_000, 200_000, numbers) == int(1_000 * BLIND_SHRINK)
