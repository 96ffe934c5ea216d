"""What a provider's "prompt is too long" error says about the sizes, and how small the retry must be."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["BLIND_SHRINK", "SAFETY_MARGIN", "ProviderNumbers", "overflow_target", "parse_overflow"]

SAFETY_MARGIN = 0.1
"""The retry aims this fraction below the window, so a counter that is slightly off still fits."""
BLIND_SHRINK = 0.5
"""Without the provider's numbers the overflow is of unknown size: the retry aims at this fraction of the
rejected request (two retries reach a quarter)."""

_N = r"(\d[\d,_]*)"
_TOKENS = r"\s*(?:input\s+)?tokens?"


@dataclass(frozen=True)
class ProviderNumbers:
    """The sizes an overflow error reported, in the provider's tokens (`None`: not said)."""

    prompt_tokens: int | None = None
    limit: int | None = None
    output_tokens: int | None = None


# (pattern, the field each group fills), most specific first; the first pattern to give a field wins.
_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), fields)
    for pattern, fields in (
        # Anthropic: "input length and `max_tokens` exceed context limit: 187254 + 20000 > 200000"
        (rf"{_N}\s*\+\s*{_N}\s*>\s*{_N}", ("prompt_tokens", "output_tokens", "limit")),
        # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
        (rf"{_N}{_TOKENS}\s*>\s*{_N}", ("prompt_tokens", "limit")),
        # OpenAI, DeepSeek, vLLM: "you requested 8500 tokens (7500 in the messages, 1000 in the completion)"
        (rf"{_N}\s+in the messages", ("prompt_tokens",)),
        (rf"{_N}\s+in the completion", ("output_tokens",)),
        # OpenAI, vLLM: "maximum context length is 128000 tokens"; xAI: "maximum prompt length is 131072"
        (rf"maximum (?:context|prompt|input) length (?:is|of)\s*{_N}", ("limit",)),
        # OpenAI: "your messages resulted in 130512 tokens"; vLLM: "your request has 40000 input tokens";
        # xAI: "the request contains 150000 tokens"; Mistral: "Prompt contains 40000 tokens"
        (rf"(?:resulted in|request has|contains(?: at least)?)\s*{_N}{_TOKENS}", ("prompt_tokens",)),
        # Mistral: "too large for model with 32768 maximum context length"
        (rf"{_N}\s+maximum context length", ("limit",)),
        # Gemini: "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576)"
        (rf"input token count\s*\(?\s*{_N}", ("prompt_tokens",)),
        (rf"maximum number of tokens allowed\s*\(?\s*{_N}", ("limit",)),
        # llama.cpp: "request (5000 tokens) exceeds the available context size (4096 tokens)"
        (rf"request\s*\(\s*{_N}{_TOKENS}\s*\)", ("prompt_tokens",)),
        (rf"context (?:size|window)(?: of)?\s*\(?\s*{_N}", ("limit",)),
        # Cohere: "the prompt cannot exceed 4081 - received 5000"
        (rf"cannot exceed\s*{_N}", ("limit",)),
        (rf"received\s*{_N}", ("prompt_tokens",)),
    )
)


def _texts(value: Any, depth: int = 0) -> list[str]:
    """Every string inside an error body (a dict, a list, JSON text or bytes)."""
    if depth > 5 or value is None:
        return []
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            decoded: Any = json.loads(value)
        except ValueError:
            return [value]
        return [value] if isinstance(decoded, str) else _texts(decoded, depth + 1)
    if isinstance(value, dict):
        return [t for item in value.values() for t in _texts(item, depth + 1)]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, list | tuple):
        return [t for item in value for t in _texts(item, depth + 1)]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return []


def _number(text: str) -> int | None:
    digits = text.replace(",", "").replace("_", "")
    return int(digits) if digits.isdigit() and int(digits) > 0 else None


def parse_overflow(error: BaseException) -> ProviderNumbers:
    """The prompt size, window and output reservation an overflow error states, when it states them.

    Reads the error's text and, for an HTTP error, every string in its body (OpenAI, Anthropic, Gemini,
    Mistral, xAI, Cohere, vLLM and llama.cpp wordings); what it cannot find is `None`."""
    text = "\n".join([str(error), *_texts(getattr(error, "body", None))])
    found: dict[str, int] = {}
    for pattern, fields in _PATTERNS:
        if all(f in found for f in fields):
            continue
        match = pattern.search(text)
        if match is None:
            continue
        for name, raw in zip(fields, match.groups(), strict=True):
            value = _number(raw)
            if value is not None:
                found.setdefault(name, value)
    return ProviderNumbers(found.get("prompt_tokens"), found.get("limit"), found.get("output_tokens"))


def overflow_target(estimate: int, budget: int, numbers: ProviderNumbers) -> int:
    """How many tokens (our estimate, request overhead included) the retry may have; always below `estimate`.

    With the provider's prompt size and window, our counter is scaled by how far it was off
    (`prompt_tokens / estimate`) and the target is the window, less the output it reserves, less
    `SAFETY_MARGIN`, in our units; never above our own `budget`. Without them the request is over by an unknown
    amount: the target is `BLIND_SHRINK` of the rejected request."""
    ceiling = float(budget)
    if numbers.limit is not None:
        room = numbers.limit - (numbers.output_tokens or 0)
        ratio = numbers.prompt_tokens / estimate if numbers.prompt_tokens and estimate > 0 else 1.0
        ceiling = min(ceiling, room / ratio)
    target = ceiling * (1 - SAFETY_MARGIN)
    if numbers.prompt_tokens is None or numbers.limit is None or target >= estimate:
        target = min(target, estimate * BLIND_SHRINK)
    return max(int(target), 0)
