"""Where spend is written down: the metadata keys, and the collector that catches the summarizer's usage.

Kept free of the rest of the package (it imports pydantic-ai only), so the summarizers can report into it.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, TypeAlias

from pydantic_ai.usage import RequestUsage

__all__ = [
    "REQUEST_KIND_KEY",
    "SUMMARIZER_USAGE_KEY",
    "RequestKind",
    "collect_summarizer_usage",
    "report_summarizer_usage",
    "usage_record",
]

SUMMARIZER_USAGE_KEY = "summarization_pydantic_ai.summarizer_usage"
"""In a summary's `CompactionPart.metadata`: one entry per model call the summarizer made for it
(`{"id", "model", "provider", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"}`), so
the summarizer's calls are priced and persisted with the history like the agent's own requests."""

REQUEST_KIND_KEY = "summarization_pydantic_ai.request_kind"
"""In a `ModelResponse.metadata`: what kind of request it answered, when not the agent's own (`'overflow_retry'`)."""

RequestKind: TypeAlias = Literal["agent", "summarizer", "overflow_retry"]
REQUEST_KINDS: tuple[RequestKind, ...] = ("agent", "summarizer", "overflow_retry")

_collector: ContextVar[list[dict[str, Any]] | None] = ContextVar("summarizer_usage", default=None)


def usage_record(usage: RequestUsage, model: str | None, provider: str | None) -> dict[str, Any]:
    """One model call as it is stored under `SUMMARIZER_USAGE_KEY` (plain JSON: it lives in messages.json)."""
    return {
        "id": os.urandom(8).hex(),  # counted once, however many copies of the summary a history holds
        "model": model,
        "provider": provider,
        "input_tokens": usage.input_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "output_tokens": usage.output_tokens,
    }


@contextmanager
def collect_summarizer_usage() -> Generator[list[dict[str, Any]]]:
    """Collect what `report_summarizer_usage` reports inside the block (the calls of one summary)."""
    calls: list[dict[str, Any]] = []
    token = _collector.set(calls)
    try:
        yield calls
    finally:
        _collector.reset(token)


def report_summarizer_usage(usage: RequestUsage, model: str | None, provider: str | None = None) -> None:
    """Record one model call a summarizer made, for the summary it is writing (no-op outside a compaction).

    A custom `Summarizer` that calls a model reports each call here, so its cost is counted with the session."""
    calls = _collector.get()
    if calls is not None:
        calls.append(usage_record(usage, model, provider))
