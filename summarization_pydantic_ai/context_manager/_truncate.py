"""Cut a tool output to its head and tail lines within a token budget, whatever its shape."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, cast

import pydantic_core
from pydantic_ai.messages import ToolReturn

from .._tokens import CHARS_PER_TOKEN, estimate_text_tokens

__all__ = ["Truncation", "truncate_output", "truncate_text"]

_HEAD_SHARE = 0.6


@dataclass(frozen=True)
class Truncation:
    """What a cut removed."""

    tokens_before: int
    tokens_after: int
    lines_before: int
    lines_kept: int


def _note(lines_before: int, lines_kept: int, tokens_before: int, max_tokens: int) -> str:
    return (
        f"\n[... output truncated: kept {lines_kept} of {lines_before} lines (head and tail), "
        f"about {max_tokens:,} of {tokens_before:,} tokens; the middle was cut ...]\n"
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


def truncate_text(text: str, max_tokens: int) -> tuple[str, Truncation | None]:
    """`text` itself when it fits in `max_tokens`, else its head and tail lines plus a note, within `max_tokens`."""
    tokens_before = estimate_text_tokens(text)
    if tokens_before <= max_tokens:
        return text, None
    lines = text.splitlines(keepends=True)
    note = _note(len(lines), 0, tokens_before, max_tokens)
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
        result = "".join(head) + _note(len(lines), kept, tokens_before, max_tokens) + "".join(tail)
        if estimate_text_tokens(result) <= max_tokens or budget == 0:
            return result, Truncation(tokens_before, estimate_text_tokens(result), len(lines), kept)
        budget = max(budget - (estimate_text_tokens(result) - max_tokens) * CHARS_PER_TOKEN - 8, 0)


def _as_text(value: Any) -> str:
    """Structured data as indented JSON, so it is cut at line boundaries like text."""
    try:
        return json.dumps(pydantic_core.to_jsonable_python(value), indent=1, ensure_ascii=False, default=str)
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
        return str(value)


def truncate_output(result: Any, max_tokens: int) -> tuple[Any, Truncation | None]:
    """Truncate a tool's result: strings, dicts/lists/models (as JSON text) and `ToolReturn` values.

    Multimodal items pass unchanged (they are counted at fixed estimates elsewhere).
    """
    if isinstance(result, ToolReturn):
        tool_return = cast(ToolReturn[Any], result)
        value, cut = truncate_output(tool_return.return_value, max_tokens)
        content: Any = tool_return.content
        if isinstance(content, str):
            content, content_cut = truncate_text(content, max_tokens)
            cut = cut or content_cut
        return (replace(tool_return, return_value=value, content=content) if cut else tool_return), cut
    if isinstance(result, str):
        return truncate_text(result, max_tokens)
    if result is None or isinstance(result, bool | int | float):
        return result, None
    structured = isinstance(result, list | tuple | dict) or hasattr(result, "__dict__")
    if structured and estimate_text_tokens(text := _as_text(result)) > max_tokens:
        return truncate_text(text, max_tokens)
    return cast(Any, result), None
