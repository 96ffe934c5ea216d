"""`LimitWarnerProcessor`: tell the model when it is running out of iterations, context or tokens."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart

from .._events import EventCallback, LimitWarningIssued, emit_event
from .._tokens import TokenCounter, count_tokens_approximately
from ._base import HistoryProcessor, RunInfo, check_counter, measure, resolve_budget

__all__ = ["WARNING_METADATA_KEY", "LimitWarnerProcessor"]

WARNING_METADATA_KEY = "summarization_pydantic_ai.limit_warning"


def _is_warning(part: Any) -> bool:
    return isinstance(part, SystemPromptPart) and bool(part.metadata) and WARNING_METADATA_KEY in (part.metadata or {})


def _without_warnings(messages: list[ModelMessage]) -> list[ModelMessage]:
    """`messages` without earlier warnings (the same list object when there were none)."""
    if not any(isinstance(m, ModelRequest) and any(_is_warning(p) for p in m.parts) for m in messages):
        return messages
    result: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest) and any(_is_warning(p) for p in message.parts):
            parts = [p for p in message.parts if not _is_warning(p)]
            if parts:
                result.append(replace(message, parts=parts))
            continue
        result.append(message)
    return result


@dataclass
class LimitWarnerProcessor(HistoryProcessor):
    """Append one marked warning when iterations, context or total tokens pass `warn_at` of their limits.

    Only the latest warning is kept: earlier ones are removed, so warnings never pile up. Limits come from the
    fields or, in capability form, from the run (`usage_limits.request_limit`, `usage_limits.total_tokens_limit`,
    the model's context window). In plain form only the context check applies.

    Example:
        ```python
        agent = Agent('openai:gpt-4.1', capabilities=[LimitWarnerProcessor(warn_at=0.8, max_iterations=30)])
        ```
    """

    warn_at: float = 0.8
    max_iterations: int | None = None
    max_context_tokens: int | None = None
    max_total_tokens: int | None = None
    model_name: str | None = None
    token_counter: TokenCounter = count_tokens_approximately
    event_callback: EventCallback | None = None

    def __post_init__(self) -> None:
        if not 0 < self.warn_at <= 1:
            raise ValueError(f"warn_at must be in (0, 1], got {self.warn_at!r}")
        for name in ("max_iterations", "max_context_tokens", "max_total_tokens"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        check_counter(self.token_counter)

    async def process(self, messages: list[ModelMessage], run: RunInfo | None) -> list[ModelMessage]:
        if not messages:
            return messages
        cleaned = _without_warnings(messages)
        notes = await self._notes(cleaned, run)
        if not notes:
            return cleaned
        text = "Limit warning: " + "; ".join(notes) + ". Prioritize finishing the task and give your answer soon."
        warning = SystemPromptPart(text, metadata={WARNING_METADATA_KEY: True})
        await emit_event(self.event_callback, LimitWarningIssued(type(self).__name__, text))
        return [*cleaned, ModelRequest(parts=[warning])]

    async def _notes(self, messages: list[ModelMessage], run: RunInfo | None) -> list[str]:
        notes: list[str] = []
        limits = run.ctx.usage_limits if run else None
        iterations = self.max_iterations or (limits.request_limit if limits else None)
        if run is not None and iterations:
            used = run.ctx.usage.requests + 1  # the request being prepared
            if used >= self.warn_at * iterations:
                notes.append(f"model request {used} of {iterations}")
        total_limit = self.max_total_tokens or (limits.total_tokens_limit if limits else None)
        if run is not None and total_limit:
            used_tokens = run.ctx.usage.total_tokens
            if used_tokens >= self.warn_at * total_limit:
                notes.append(f"{used_tokens:,} of {total_limit:,} total tokens used")
        context = self.max_context_tokens or resolve_budget(
            None, self.model_name, 0, run, needed=True, assume_default=False
        )
        if context:
            size = await measure(messages, self.token_counter, run, context, None)
            if size.tokens >= self.warn_at * context:
                notes.append(f"context {size.tokens:,} of {context:,} tokens ({size.tokens / context:.0%})")
        return notes
