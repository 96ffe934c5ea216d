"""Scripted sessions for the prompt-cache tests: messages of a known size, so token counts are exact."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from summarization_pydantic_ai.cache import CacheSimulator, PromptCache, SentRequest, cache_prices

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def sized(text: str, tokens: int) -> ModelRequest:
    """A user message this module's counter counts as `tokens` (its text says how many)."""
    return ModelRequest(parts=[UserPromptPart(f"{text}|{tokens}")])


def answer(text: str, tokens: int) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"{text}|{tokens}")])


def tokens_of(message: ModelMessage) -> int:
    """The size written into each text (`'name|1000'`), summed over the parts and a prompt's items."""
    total = 0
    for part in message.parts:
        content = getattr(part, "content", "")
        for item in [content] if isinstance(content, str) else content:
            total += head_tokens(item) if isinstance(item, str) else 0
    return total


def head_tokens(text: str) -> int:
    """Instructions and tool JSON are sized the same way (`'...|188086'`); no size: 0 tokens."""
    tail = text.rpartition("|")[2]
    return int(tail) if tail.isdigit() else 0


def simulator(cache: PromptCache, model: str | None = None) -> CacheSimulator:
    prices = cache_prices(model) if model else None
    return CacheSimulator(cache, prices, message_tokens=tokens_of, text_tokens=head_tokens)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def conversation(turns: int, size: int = 1000) -> Callable[[int], list[ModelMessage]]:
    """The history before each turn of a conversation that grows by an answer and a question per turn."""
    messages: list[ModelMessage] = [sized("q0", size)]
    history: list[list[ModelMessage]] = [list(messages)]
    for turn in range(1, turns):
        messages += [answer(f"a{turn}", size), sized(f"q{turn}", size)]
        history.append(list(messages))
    return lambda turn: history[turn]


def send(messages: Sequence[ModelMessage], seconds: float = 0, instructions: str = "") -> SentRequest:
    return SentRequest(messages, instructions=instructions, timestamp=at(seconds))
