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

from .._artifacts import TODO_MARKS, changed_path, todo_items
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
    changed: dict[str, tuple[str, list[str]]]
    """Files created or changed by a tool call: path -> (label of the first call, tools that changed it)."""
    todos: tuple[str, list[tuple[str, str]]] | None = None
    """The latest todo list a `write_todos`-style call set: (label, [(content, status)])."""


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
    found = _Extract([], [], {}, Counter(), [], [], {})
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
                _note_artifacts(found, part, label)
            elif isinstance(part, ToolReturnPart) and part.outcome != "success":
                found.errors.append(f"{part.tool_name} [{part.tool_call_id}] {part.outcome}: {_one_line(text, 200)}")
            elif isinstance(part, RetryPromptPart):  # pyright: ignore[reportDeprecated]
                found.errors.append(f"retry {part.tool_name or 'output'}: {_one_line(text, 200)}")
            elif isinstance(part, ToolReturnPart) and _mentions_error(text):
                found.errors.append(f"{part.tool_name} [{part.tool_call_id}]: {_one_line(text, 200)}")
            for path in find_paths(text):
                found.artifacts.setdefault(path, label)
    return found


def _note_artifacts(found: _Extract, part: ToolCallPart, label: str) -> None:
    """The artifact trail is kept whole: every file changed, and the latest todo list (not a sample of either)."""
    path = changed_path(part)
    if path is not None:
        tools = found.changed.setdefault(path, (label, []))[1]
        if part.tool_name not in tools:
            tools.append(part.tool_name)
    items = todo_items(part)
    if items is not None:
        found.todos = (label, items)


def _artifact_lines(found: _Extract) -> list[str]:
    changed = [
        f"`{path}` (changed by {', '.join(tools)}; msg {label})" for path, (label, tools) in found.changed.items()
    ]
    mentioned = [f"`{path}` (msg {label})" for path, label in found.artifacts.items() if path not in found.changed]
    return [*changed, *mentioned[-40:]]


def _todo_lines(found: _Extract) -> str:
    if found.todos is None:
        return ""
    label, items = found.todos
    lines = "\n".join(f"- {TODO_MARKS.get(status, '-')} {content} ({status})" for content, status in items)
    return f"\nTodo list (msg {label}):\n{lines or 'empty'}"


_CHANGED_LINE = re.compile(r"^- `([^`\n]+)` \(changed by ([^;\n]+); msg ([^)\n]+)\)$", re.MULTILINE)
_TODO_BLOCK = re.compile(r"^Todo list \(msg ([^)\n]+)\):\n((?:- .*(?:\n|$))*)", re.MULTILINE)
_TODO_LINE = re.compile(r"^- (?:\[.\]|-) (.+) \(([^()]+)\)$")


def _carry_forward(found: _Extract, previous: str | None) -> None:
    """A rolling summary keeps the trail of the summary it replaces: its changed files (listed first) and, when
    this span set no todo list, its todo list. Read back from the lines `_artifact_lines`/`_todo_lines` wrote."""
    if not previous:
        return
    changed: dict[str, tuple[str, list[str]]] = {}
    for path, tools, label in _CHANGED_LINE.findall(previous):
        changed.setdefault(path, (label, tools.split(", ")))
    for path, (label, tools) in found.changed.items():
        known = changed.setdefault(path, (label, []))[1]
        known.extend(t for t in tools if t not in known)
    found.changed = changed
    blocks = _TODO_BLOCK.findall(previous)
    if found.todos is None and blocks:
        label, body = blocks[-1]
        items = [(m[1], m[2]) for m in map(_TODO_LINE.match, body.splitlines()) if m]
        found.todos = (label, items)


def _fit(sections: list[str], keep: set[int], budget: int) -> list[str]:
    """Shorten the sections not in `keep` (each in proportion to its length) so that all fit in `budget`."""
    total = sum(len(s) + 2 for s in sections)
    flexible = sum(len(s) for i, s in enumerate(sections) if i not in keep)
    if total <= budget or not flexible:
        return sections
    ratio = max(budget - (total - flexible), 0) / flexible
    return [s if i in keep else elide_middle(s, max(int(len(s) * ratio), 160)) for i, s in enumerate(sections)]


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
        _carry_forward(found, request.previous_summary)
        latest = (
            request.latest_user_request
            or latest_user_request(request.messages)
            or latest_request_from_summary(request.previous_summary)
            or "none"
        )
        tools = [f"{name} x{count}" for name, count in found.tools.most_common(20)]
        artifacts = _artifact_lines(found)
        decisions = [_one_line(t, 300) for t in found.assistant_texts[-6:-1]]
        current = _one_line(found.assistant_texts[-1], 800) if found.assistant_texts else "none"
        sections = [
            _section("Intent", _bounded(found.user_requests, 3, 7)),
            _section("Decisions", decisions),
            _section("Artifacts", artifacts),
            _section("Tools used", tools),
            _section("Errors", _bounded(found.errors, 3, 7)),
            f"## Current state\n{current}{_todo_lines(found)}",
            _section("Next steps", found.next_steps[-10:]),
        ]
        latest_section = f"{_LATEST_HEADING}{elide_middle(latest, 4_000)}"
        header = f"Summary of {len(request.messages)} messages (extracted without a model)."
        if request.focus:
            header += f" Focus: {_one_line(request.focus, 200)}"
        if request.previous_summary:  # its trail is carried into this one's sections: it may shrink first
            room = max(self.max_chars - sum(map(len, sections)) - len(header) - len(latest_section) - 40, 500)
            sections.insert(0, f"## Earlier summary\n{elide_middle(request.previous_summary, room)}")
        # The latest request is kept whole, the artifact trail (Artifacts, Current state) next; the other
        # sections give way when the summary is too long.
        budget = max(self.max_chars - len(latest_section) - 2, 200)
        trail = {i for i, s in enumerate(sections) if s.startswith(("## Artifacts", "## Current state"))}
        body = "\n\n".join(_fit(sections, trail, budget - len(header) - 2))
        return elide_middle(f"{header}\n\n{body}", budget) + "\n\n" + latest_section
