"""What a summarizer receives and promises."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic_ai.messages import ModelMessage

__all__ = ["Summarizer", "SummarizerError", "SummaryRequest"]


@dataclass(frozen=True)
class SummaryRequest:
    """Everything a summarizer needs: the whole span being replaced, and the summary it extends."""

    messages: Sequence[ModelMessage]
    """Every message of the span, oldest first (earlier summaries are passed as `previous_summary`, not here)."""
    previous_summary: str | None = None
    """The summary this one replaces and must carry forward (rolling summaries)."""
    focus: str | None = None
    """What the summary should concentrate on (e.g. from `/compact focus on the failing tests`)."""
    latest_user_request: str | None = None
    """The most recent user prompt in the whole history, to be repeated verbatim."""
    first_index: int = 0
    """Position of `messages[0]` in the full history, for message labels."""


class SummarizerError(RuntimeError):
    """A summarizer could not produce a usable summary (raised, timed out, or returned empty text)."""


@runtime_checkable
class Summarizer(Protocol):
    """Anything with `async summarize(request) -> str` can write summaries.

    Must raise (any exception) rather than return error text: the processors fall back to the deterministic
    summarizer on failure, so an error message never becomes a summary.
    """

    async def summarize(self, request: SummaryRequest) -> str: ...
