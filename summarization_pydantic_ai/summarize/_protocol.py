"""What a summarizer receives and promises."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic_ai.messages import ModelMessage

__all__ = ["LiveRequest", "Summarizer", "SummarizerError", "SummaryRequest"]


@dataclass(frozen=True)
class LiveRequest:
    """The model request of the run that is being compacted, as the agent was about to send it.

    A summarizer that uses the run's own model (the default, `RUN_MODEL`) sends these very messages, settings
    and request parameters (instructions, tool definitions) and appends only its instruction, so a provider with
    prefix caching reads the whole conversation from its cache."""

    model: Any
    """The run's `Model`."""
    messages: Sequence[ModelMessage] | None = None
    """The request's messages; `None` when they cannot be reused as they are (e.g. the provider rejected them
    as too long), then only the model is used."""
    model_settings: Any = None
    model_request_parameters: Any = None
    """The request's `ModelRequestParameters`: instructions, tool definitions, output mode."""
    tokens: int | None = None
    """The request's estimated size (messages, instructions and tools), when measured."""


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
    live: LiveRequest | None = None
    """The run's request being compacted, when the compaction happens inside a run (see `RUN_MODEL`)."""
    window_tokens: int | None = None
    """The agent's token budget: what a summarizer whose own context window is unknown may assume."""
    kept_messages: int = 0
    """How many messages of the live request stay verbatim after the summary (the kept tail)."""
    latest_request_kept: bool = False
    """The latest user request stays verbatim in the working context beside the summary (every compaction path
    keeps it: in the kept tail, the working set, or the summary's own request). A summary then names a long one
    by reference instead of copying it (`VERBATIM_REQUEST_CHARS`)."""


class SummarizerError(RuntimeError):
    """A summarizer could not produce a usable summary (raised, timed out, or returned empty text)."""


@runtime_checkable
class Summarizer(Protocol):
    """Anything with `async summarize(request) -> str` can write summaries.

    Must raise (any exception) rather than return error text: the processors fall back to the deterministic
    summarizer on failure, so an error message never becomes a summary.
    """

    async def summarize(self, request: SummaryRequest) -> str: ...
