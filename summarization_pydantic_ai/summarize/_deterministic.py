"""A summarizer that needs no LLM: it extracts the summary sections from the messages themselves.

It is the offline default for examples and the fallback when an LLM summarizer fails. It is deterministic
(same input, same summary), fast, and never invents anything: every line quotes or counts the messages.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from .._messages import get_message_id
from .._render import elide_middle, part_text
from ._protocol import SummaryRequest
from ._validate import find_paths

__all__ = ["DeterministicSummarizer", "latest_request_from_summary", "latest_user_request"]

_NEXT_STEP = re.compile(r"^\s*(?:[-*]\s*\[ \]|(?:next|todo|then|remaining)\b[:\s])", re.IGNORECASE)


def latest_user_request(messages: Sequence[ModelMessage]) -> str | None:
    """The text of the most recent user prompt in `messages`."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    return part_text(part)
    return None


_LATEST_HEADING = "## Latest user request\n"


def latest_request_from_summary(summary: str | None) -> str | None:
    """The verbatim latest request a structured summary carries in its last section, if it has one."""
    if not summary or _LATEST_HEADING not in summary:
        return None
    text = summary.rsplit(_LATEST_HEADING, 1)[1].strip()
    return text if text and text.lower() != "none" else None


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class _Extract:
    user_requests: list[str]
    assistant_texts: list[str]
    artifacts: dict[str, str]
    tools: Counter[str]
    errors: list[str]
    next_steps: list[str]


_ERROR_WORDS = ("error", "traceback", "exception")


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _mentions_error(text: str) -> bool:
    """Whether `text` has the word error, traceback or exception (as `\\b(error|...)\\b` would find it), by
    substring search: a case-insensitive regular expression over every tool output was the slow part."""
    lowered = text.lower()
    for word in _ERROR_WORDS:
        start = lowered.find(word)
        while start != -1:
            end = start + len(word)
            before = lowered[start - 1] if start else " "
            after = lowered[end] if end < len(lowered) else " "
            if not _is_word_char(before) and not _is_word_char(after):
                return True
            start = lowered.find(word, end)
    return False


def _label(message: ModelMessage, index: int) -> str:
    return get_message_id(message) or f"#{index}"


def _extract(request: SummaryRequest) -> _Extract:
    found = _Extract([], [], {}, Counter(), [], [])
    for offset, message in enumerate(request.messages):
        label = _label(message, request.first_index + offset)
        for part in message.parts:
            text = part_text(part)
            if isinstance(part, UserPromptPart):
                found.user_requests.append(f"{_one_line(text, 300)} (msg {label})")
            elif isinstance(part, TextPart) and text.strip():
                found.assistant_texts.append(text)
                found.next_steps.extend(line.strip() for line in text.splitlines() if _NEXT_STEP.match(line))
            elif isinstance(part, ToolCallPart):
                found.tools[part.tool_name] += 1
            elif isinstance(part, ToolReturnPart) and part.outcome != "success":
                found.errors.append(f"{part.tool_name} [{part.tool_call_id}] {part.outcome}: {_one_line(text, 200)}")
            elif isinstance(part, RetryPromptPart):  # pyright: ignore[reportDeprecated]
                found.errors.append(f"retry {part.tool_name or 'output'}: {_one_line(text, 200)}")
            elif isinstance(part, ToolReturnPart) and _mentions_error(text):
                found.errors.append(f"{part.tool_name} [{part.tool_call_id}]: {_one_line(text, 200)}")
            for path in find_paths(text):
                found.artifacts.setdefault(path, label)
    return found


def _section(title: str, lines: Sequence[str]) -> str:
    body = "\n".join(f"- {line}" for line in lines) if lines else "none"
    return f"## {title}\n{body}"


def _bounded(items: Sequence[str], first: int, last: int) -> list[str]:
    if len(items) <= first + last:
        return list(items)
    return [*items[:first], f"... {len(items) - first - last} more ...", *items[-last:]]


@dataclass
class DeterministicSummarizer:
    """Extracts intent, decisions, artifacts (with the message ids they came from), errors, current state, next
    steps and the latest user request verbatim, without calling a model.

    Example:
        ```python
        processor = SummarizationProcessor(DeterministicSummarizer(), trigger=('messages', 50), keep=10)
        ```
    """

    max_chars: int = 12_000
    """Upper bound on the summary's length; the previous summary is trimmed first."""

    name: str = "deterministic"

    async def summarize(self, request: SummaryRequest) -> str:
        return self.summarize_sync(request)

    def summarize_sync(self, request: SummaryRequest) -> str:
        found = _extract(request)
        latest = (
            request.latest_user_request
            or latest_user_request(request.messages)
            or latest_request_from_summary(request.previous_summary)
            or "none"
        )
        tools = [f"{name} x{count}" for name, count in found.tools.most_common(20)]
        artifacts = [f"`{path}` (msg {label})" for path, label in list(found.artifacts.items())[-40:]]
        decisions = [_one_line(t, 300) for t in found.assistant_texts[-6:-1]]
        current = _one_line(found.assistant_texts[-1], 800) if found.assistant_texts else "none"
        sections = [
            _section("Intent", _bounded(found.user_requests, 3, 7)),
            _section("Decisions", decisions),
            _section("Artifacts", artifacts),
            _section("Tools used", tools),
            _section("Errors", _bounded(found.errors, 3, 7)),
            f"## Current state\n{current}",
            _section("Next steps", found.next_steps[-10:]),
        ]
        latest_section = f"{_LATEST_HEADING}{elide_middle(latest, 4_000)}"
        header = f"Summary of {len(request.messages)} messages (extracted without a model)."
        if request.focus:
            header += f" Focus: {_one_line(request.focus, 200)}"
        body = "\n\n".join(sections)
        if request.previous_summary:
            room = max(self.max_chars - len(body) - len(header) - len(latest_section) - 40, 500)
            body = f"## Earlier summary\n{elide_middle(request.previous_summary, room)}\n\n{body}"
        # The latest request is kept whole; the other sections give way when the summary is too long.
        budget = max(self.max_chars - len(latest_section) - 2, 200)
        return elide_middle(f"{header}\n\n{body}", budget) + "\n\n" + latest_section
