"""Sizes that keep a step's outputs inside the window: the step limit (parallel calls whose outputs each pass the
per-output limit can still fill the window together) and the page an evicted output is read back in."""

from __future__ import annotations

from typing import Any, cast

from pydantic_ai.messages import ModelRequest, ToolReturnPart

from summarization_pydantic_ai._tokens import estimate_text_tokens

from ._content import as_text
from ._policy import EVICTION_METADATA_KEY

__all__ = ["MAX_PAGE_LINES", "largest_over_step", "page_lines"]

MAX_PAGE_LINES = 200
"""The page the preview's note suggests for an output of ordinary lines."""


def page_lines(lines: int, tokens: int, limit: int) -> int:
    """Lines per `read_file` page of an evicted output of `lines` lines and `tokens` tokens, so that a page (at the
    output's average line size) takes at most half of `limit`: a page read back is never evicted again."""
    if lines <= 0 or tokens <= 0:
        return MAX_PAGE_LINES
    return max(1, min(MAX_PAGE_LINES, lines * limit // (2 * tokens)))


def largest_over_step(
    request: ModelRequest, index: int, replacements: dict[tuple[int, int], ToolReturnPart], limit: int
) -> tuple[int, ToolReturnPart, str] | None:
    """When the tool outputs of `request` (at `index`, with this pass's `replacements`) add up to more than `limit`
    tokens, the largest one eviction has not handled yet (part index, part, text); else `None`."""
    total = 0
    largest: tuple[int, int, ToolReturnPart, str] | None = None
    for j, original in enumerate(request.parts):
        part = replacements.get((index, j), original)
        if not isinstance(part, ToolReturnPart):
            continue
        text = as_text(part.content)
        tokens = estimate_text_tokens(text) if text is not None else 0
        total += tokens
        if text is not None and not _handled(part) and (largest is None or tokens > largest[0]):
            largest = (tokens, j, part, text)
    if total <= limit or largest is None:
        return None
    return largest[1], largest[2], largest[3]


def _handled(part: ToolReturnPart) -> bool:
    """Evicted, pending in agent mode, or failed to save: eviction has its mark on it."""
    metadata: Any = part.metadata
    return isinstance(metadata, dict) and EVICTION_METADATA_KEY in cast(dict[str, Any], metadata)
