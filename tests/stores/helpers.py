"""Messages for the store contract suite."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai import SUMMARY_METADATA_KEY, ensure_message_id, get_message_id, is_summary_message
from summarization_pydantic_ai.cost import session_costs
from summarization_pydantic_ai.store import SessionCatalog
from summarization_pydantic_ai.store._catalog import prompt_of

START = datetime(2026, 1, 1, tzinfo=UTC)


def turns(n: int, start: int = 0, *, topic: str = "apples") -> list[ModelMessage]:
    """`n` messages alternating user prompt / model text, each with an id and a timestamp a minute apart."""
    out: list[ModelMessage] = []
    for i in range(start, start + n):
        stamp = START + timedelta(minutes=i)
        message: ModelMessage = (
            ModelRequest(parts=[UserPromptPart(f"question {i} about {topic}", timestamp=stamp)])
            if i % 2 == 0
            else ModelResponse([TextPart(f"answer {i} on {topic}")], timestamp=stamp)
        )
        ensure_message_id(message)
        out.append(message)
    return out


def tool_exchange(tool_name: str, result: str) -> list[ModelMessage]:
    call = ModelResponse([ToolCallPart(tool_name, {"q": "x"}, tool_call_id="c1")], timestamp=START)
    ret = ModelRequest(parts=[ToolReturnPart(tool_name, result, tool_call_id="c1", timestamp=START)])
    for message in (call, ret):
        ensure_message_id(message)
    return [call, ret]


def summary(covered: list[ModelMessage], *, before: list[ModelMessage], after: list[ModelMessage]) -> ModelRequest:
    """A summary as the middleware writes it: what it covers, and the working context around it."""
    ids = [get_message_id(m) for m in covered]
    info: dict[str, Any] = {
        "covers": ids,
        "first_id": ids[0],
        "last_id": ids[-1],
        "working_before": [get_message_id(m) for m in before],
        "working_after": [get_message_id(m) for m in after],
    }
    part = CompactionPart(content="summary of the start", metadata={SUMMARY_METADATA_KEY: info})
    message = ModelRequest(parts=[part])
    ensure_message_id(message)
    return message


def plain_summary(covered: list[ModelMessage], replaces: Sequence[ModelMessage] = ()) -> ModelRequest:
    """A summary as a plain processor writes it: only what it covers (and the summaries it replaces)."""
    info: dict[str, Any] = {
        "covers": [get_message_id(m) for m in covered],
        "replaces_summaries": [get_message_id(m) for m in replaces],
    }
    message = ModelRequest(parts=[CompactionPart(content="plain summary", metadata={SUMMARY_METADATA_KEY: info})])
    ensure_message_id(message)
    return message


def edited(message: ModelMessage, text: str) -> ModelMessage:
    """A new version of `message` (same id, new content)."""
    copy = ModelMessagesTypeAdapter.validate_python(ModelMessagesTypeAdapter.dump_python([message]))[0]
    part = copy.parts[0]
    if isinstance(part, TextPart | UserPromptPart):
        part.content = text
    return copy


def dumped(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def ids(messages: list[ModelMessage]) -> list[str | None]:
    return [get_message_id(m) for m in messages]


def priced(n: int, start: int, model: str = "gpt-4o") -> list[ModelMessage]:
    """`turns`, whose answers are responses of `model` with usage (priced by genai-prices)."""
    out = turns(n, start)
    for message in out:
        if isinstance(message, ModelResponse):
            message.model_name, message.provider_name = model, "openai"
            message.usage = RequestUsage(input_tokens=1_000 + len(out), output_tokens=100)
    return out


def expected(records: list[ModelMessage]) -> tuple[Any, ...]:
    """What a listing must show of a session whose records (every version, in recording order) are `records`,
    worked out here without the catalogue."""
    firsts: dict[str | None, ModelMessage] = {}
    for record in records:
        firsts.setdefault(get_message_id(record), record)
    messages = [m for m in firsts.values() if not is_summary_message(m)]
    responses = [m for m in messages if isinstance(m, ModelResponse) and m.model_name]
    model = f"{responses[-1].provider_name}:{responses[-1].model_name}" if responses else None
    prompt = next((p for m in messages if (p := prompt_of(m)) is not None), None)
    return len(messages), len(firsts) - len(messages), prompt, model, session_costs(records)


def view(entry: SessionCatalog) -> tuple[Any, ...]:
    return entry.message_count, entry.compactions, entry.first_prompt, entry.model, entry.cost
