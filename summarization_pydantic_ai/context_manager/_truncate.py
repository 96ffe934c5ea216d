"""Cut a tool output to its head and tail lines within a token budget, whatever its shape."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, cast

import pydantic_core
from pydantic_ai.messages import ToolReturn

from .._tokens import CHARS_PER_TOKEN, estimate_text_tokens

__all__ = ["TRUNCATED_METADATA_KEY", "Truncation", "truncate_output", "truncate_text"]

TRUNCATED_METADATA_KEY = "summarization_pydantic_ai.truncated"
"""Set in a tool return's metadata when overflow recovery cut it in the working history: its original size."""

_HEAD_SHARE = 0.6


@dataclass(frozen=True)
class Truncation:
    """What a cut removed."""

    tokens_before: int
    tokens_after: int
    lines_before: int
    lines_kept: int


def _note(lines_before: int, lines_kept: int, tokens_before: int, max_tokens: int, pointer: str = "") -> str:
    return (
        f"\n[... output truncated: kept {lines_kept} of {lines_before} lines (head and tail), "
        f"about {max_tokens:,} of {tokens_before:,} tokens; the middle was cut{pointer} ...]\n"
    )


def _take(lines: list[str], budget: int, from_end: bool) -> list[str]:
    """Whole lines from one end within `budget` characters; a first line longer than the budget is cut."""
    taken: list[str] = []
    used = 0
    for line in reversed(lines) if from_end else lines:
        if used + len(line) > budget:
            if not taken and budget > 0:  # one very long line: keep the part of it that fits
                taken.append(line[len(line) - budget :] if from_end else line[:budget])
            break
        taken.append(line)
        used += len(line)
    return list(reversed(taken)) if from_end else taken


def truncate_text(text: str, max_tokens: int, *, pointer: str = "") -> tuple[str, Truncation | None]:
    """`text` itself when it fits in `max_tokens`, else its head and tail lines plus a note, within `max_tokens`.
    `pointer` ends the note: where the original is kept (e.g. `"; the original is message 9f2c…"`)."""
    tokens_before = estimate_text_tokens(text)
    if tokens_before <= max_tokens:
        return text, None
    lines = text.splitlines(keepends=True)
    if len(lines) == 1:
        return _cut_one_line(text, max_tokens, tokens_before, pointer)
    note = _note(len(lines), 0, tokens_before, max_tokens, pointer)
    if len(note) + 16 > max_tokens * CHARS_PER_TOKEN:
        # A budget too small for the note: a bare marker, itself cut to the budget.
        marker = f"[output of ~{tokens_before:,} tokens cut]"[: max_tokens * CHARS_PER_TOKEN]
        return marker, Truncation(tokens_before, estimate_text_tokens(marker), len(lines), 0)
    budget = max(max_tokens * CHARS_PER_TOKEN - len(note) - 16, 0)
    while True:
        head = _take(lines, int(budget * _HEAD_SHARE), from_end=False)
        tail_lines = lines[len(head) :]
        tail = _take(tail_lines, budget - sum(map(len, head)), from_end=True)
        kept = len(head) + len(tail)
        result = "".join(head) + _note(len(lines), kept, tokens_before, max_tokens, pointer) + "".join(tail)
        if estimate_text_tokens(result) <= max_tokens or budget == 0:
            return result, Truncation(tokens_before, estimate_text_tokens(result), len(lines), kept)
        budget = max(budget - (estimate_text_tokens(result) - max_tokens) * CHARS_PER_TOKEN - 8, 0)


def _cut_one_line(text: str, max_tokens: int, tokens_before: int, pointer: str) -> tuple[str, Truncation]:
    """A single (long) line: its start and end, with the middle cut, within `max_tokens`."""
    note = f" [... {tokens_before:,}-token line: the middle was cut{pointer} ...] "
    room = max_tokens * CHARS_PER_TOKEN - len(note) - 8
    if room <= 0:
        marker = f"[output of ~{tokens_before:,} tokens cut]"[: max_tokens * CHARS_PER_TOKEN]
        return marker, Truncation(tokens_before, estimate_text_tokens(marker), 1, 0)
    head = int(room * _HEAD_SHARE)
    result = text[:head] + note + text[len(text) - (room - head) :]
    return result, Truncation(tokens_before, estimate_text_tokens(result), 1, 1)


def _truncate_tool_return(tool_return: ToolReturn[Any], max_tokens: int, pointer: str) -> tuple[Any, Truncation | None]:
    """The return value and a text `content` share the budget: the content gets at most half of it."""
    content: Any = tool_return.content
    content_tokens = estimate_text_tokens(content) if isinstance(content, str) else 0
    budget = max_tokens - min(content_tokens, max_tokens // 2)
    value, cut = truncate_output(tool_return.return_value, budget, pointer=pointer)
    value_tokens = (
        cut.tokens_after if cut else estimate_text_tokens(_as_text(value) if not isinstance(value, str) else value)
    )
    content_cut = None
    if isinstance(content, str) and content_tokens > max_tokens - value_tokens:
        content, content_cut = truncate_text(content, max(max_tokens - value_tokens, 1), pointer=pointer)
    if cut is None and content_cut is None:
        return tool_return, None
    before = (cut.tokens_before if cut else value_tokens) + content_tokens
    after = value_tokens + (content_cut.tokens_after if content_cut else content_tokens)
    lines_before = (cut.lines_before if cut else 1) + (content_cut.lines_before if content_cut else 0)
    lines_kept = (cut.lines_kept if cut else 1) + (content_cut.lines_kept if content_cut else 0)
    truncated = replace(tool_return, return_value=value, content=content)
    return truncated, Truncation(before, after, lines_before, lines_kept)


def _as_text(value: Any) -> str:
    """Structured data as indented JSON, so it is cut at line boundaries like text."""
    try:
        return json.dumps(pydantic_core.to_jsonable_python(value), indent=1, ensure_ascii=False, default=str)
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
        return str(value)


def truncate_output(result: Any, max_tokens: int, *, pointer: str = "") -> tuple[Any, Truncation | None]:
    """Truncate a tool's result: strings, dicts/lists/models (as JSON text) and `ToolReturn` values; `pointer`
    ends the note (see `truncate_text`).

    Multimodal items pass unchanged (they are counted at fixed estimates elsewhere).
    """
    if isinstance(result, ToolReturn):
        return _truncate_tool_return(cast(ToolReturn[Any], result), max_tokens, pointer)
    if isinstance(result, str):
        return truncate_text(result, max_tokens, pointer=pointer)
    if result is None or isinstance(result, bool | int | float):
        return result, None
    structured = isinstance(result, list | tuple | dict) or hasattr(result, "__dict__")
    if structured and estimate_text_tokens(text := _as_text(result)) > max_tokens:
        return truncate_text(text, max_tokens, pointer=pointer)
    return cast(Any, result), None
