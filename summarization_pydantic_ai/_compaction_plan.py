"""What one compaction keeps and replaces (`CompactionPlan`), and where the latest user request is: shared by the
compaction (`_compaction.py`) and the working set it keeps (`_working_set.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart, UserPromptPart

from ._events import PreservedItem

__all__ = ["CompactionPlan", "latest_user_request_at"]


@dataclass(frozen=True)
class CompactionPlan:
    """What one compaction keeps and replaces: `messages[:head_end]` and `messages[cutoff:]` are kept."""

    head_end: int
    cutoff: int
    system_head: ModelRequest | None
    """The system prompt split off the first request when that request also holds the first user prompt."""
    span: tuple[ModelMessage, ...]
    """The messages the summary replaces (earlier summaries excluded, see `previous_summaries`)."""
    previous_summaries: tuple[str, ...]
    previous_summary_ids: tuple[str, ...]
    carried: tuple[ModelRequestPart, ...] = ()
    """The latest user request's prompt parts, when the span replaces the request that holds them: the summary
    (or window marker) carries them verbatim, media included, so the request survives every compaction."""
    preserved_messages: tuple[ModelMessage, ...] = ()
    """The working set taken out of the span, in order: placed verbatim between the summary and the kept tail."""
    preserved: tuple[PreservedItem, ...] = ()
    """What the working set holds after the compaction (moved, carried or already in the kept part)."""
    preserved_dropped: tuple[PreservedItem, ...] = ()
    """Working-set entries left to the summary (the budget was spent, or a placement rule left no room)."""


def latest_user_request_at(messages: Sequence[ModelMessage]) -> int | None:
    """The index of the most recent request that holds a user prompt (a summary carrying one counts)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts):
            return i
    return None
