"""What the middleware writes on each model response for the session report: the request as it measured it.

The history store already holds every message, summary and tool output; what it does not hold is how large each
request was against the window and the threshold, and which requests needed an overflow recovery. The middleware
puts exactly that on the response's metadata (recorded with it), so a report is built from the store alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelResponse

from .._events import OverflowRetry

__all__ = ["REQUEST_METADATA_KEY", "RequestMeasure", "stamp_response"]

REQUEST_METADATA_KEY = "summarization_pydantic_ai.request"
"""The key in `ModelResponse.metadata` of the request the response answers, as `ContextManagerMiddleware`
measured it: `tokens`, `max_tokens` (the budget: window minus `reserve_output_tokens`), `threshold_tokens` and,
after an overflow recovery, `overflow` (one entry per retry: `steps`, `tokens_before`, `tokens_after`)."""


@dataclass(frozen=True)
class RequestMeasure:
    """The measure of a request before it was sent."""

    tokens: int
    max_tokens: int
    threshold_tokens: int


def stamp_response(response: ModelResponse, measure: RequestMeasure, retries: Sequence[OverflowRetry]) -> None:
    """Write the request's measure on `response` (before the agent commits it, like its message id). After an
    overflow recovery the request sent is the last retry: its estimate is the request's size."""
    stamp: dict[str, Any] = {
        "tokens": retries[-1].tokens_after if retries else measure.tokens,
        "max_tokens": measure.max_tokens,
        "threshold_tokens": measure.threshold_tokens,
    }
    if retries:
        stamp["overflow"] = [
            {"steps": list(retry.steps), "tokens_before": retry.tokens_before, "tokens_after": retry.tokens_after}
            for retry in retries
        ]
    response.metadata = {**(response.metadata or {}), REQUEST_METADATA_KEY: stamp}
