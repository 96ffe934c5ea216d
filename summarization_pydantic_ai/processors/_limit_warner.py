"""`LimitWarnerProcessor`: tell the model when it is running out of iterations, context or tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart

from .._events import EventCallback, LimitWarningIssued, emit_event
from .._tokens import TokenCounter, count_tokens_approximately
from ._base import HistoryProcessor, RunInfo, check_counter, measure, resolve_budget

__all__ = ["WARNING_METADATA_KEY", "LimitWarnerProcessor", "WarnOn"]

WARNING_METADATA_KEY = "summarization_pydantic_ai.limit_warning"

WarnOn: TypeAlias = Literal["iterations", "requests", "context_window", "context", "total_tokens", "tokens"]
"""A limit `LimitWarnerProcessor.warn_on` can name; each limit has two names (the peer library's and a short one)."""

_Limit: TypeAlias = Literal["iterations", "context_window", "total_tokens"]
_LIMITS: dict[str, _Limit] = {
    "iterations": "iterations",
    "requests": "iterations",
    "context_window": "context_window",
    "context": "context_window",
    "total_tokens": "total_tokens",
    "tokens": "total_tokens",
}


def _normalize_warn_on(warn_on: Any) -> frozenset[_Limit]:
    """`None`: every limit. A name or a sequence of names (`WarnOn`); unknown or no names are refused."""
    if warn_on is None:
        return frozenset(("iterations", "context_window", "total_tokens"))
    names: list[Any] = [warn_on] if isinstance(warn_on, str) else list(warn_on)
    if not names:
        raise ValueError("warn_on must name at least one limit; pass None to warn on every limit")
    unknown = [name for name in names if name not in _LIMITS]
    if unknown:
        raise ValueError(f"warn_on: unknown limit(s) {unknown!r}; use {', '.join(repr(n) for n in _LIMITS)}")
    return frozenset(_LIMITS[name] for name in names)


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
    the model's context window). In plain form only the context check applies. `warn_on` chooses the limits that
    warn; a warning turns critical when `critical_remaining_iterations` requests or fewer are left, or when the
    context or the total tokens are at their limit.

    Example:
        ```python
        warner = LimitWarnerProcessor(warn_at=0.8, max_iterations=30, warn_on=['iterations'])
        agent = Agent('openai:gpt-4.1', capabilities=[warner])
        ```
    """

    warn_at: float = 0.8
    max_iterations: int | None = None
    max_context_tokens: int | None = None
    max_total_tokens: int | None = None
    model_name: str | None = None
    token_counter: TokenCounter = count_tokens_approximately
    event_callback: EventCallback | None = None
    warn_on: Sequence[WarnOn] | WarnOn | None = None
    """The limits that warn: `"iterations"` (or `"requests"`), `"context_window"` (or `"context"`),
    `"total_tokens"` (or `"tokens"`); `None` (the default) warns on every limit that is known."""
    critical_remaining_iterations: int = 3
    """An iteration warning is critical (finish now) when this many model requests or fewer are left, the one
    being prepared included."""
    _warn_on: frozenset[_Limit] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 < self.warn_at <= 1:
            raise ValueError(f"warn_at must be in (0, 1], got {self.warn_at!r}")
        for name in ("max_iterations", "max_context_tokens", "max_total_tokens"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        critical: Any = self.critical_remaining_iterations
        if isinstance(critical, bool) or not isinstance(critical, int) or critical < 0:
            raise ValueError(f"critical_remaining_iterations must be an int >= 0, got {critical!r}")
        self._warn_on = _normalize_warn_on(self.warn_on)
        check_counter(self.token_counter)

    async def process(self, messages: list[ModelMessage], run: RunInfo | None) -> list[ModelMessage]:
        if not messages:
            return messages
        cleaned = _without_warnings(messages)
        notes, critical = await self._notes(cleaned, run)
        if not notes:
            return cleaned
        if critical:
            text = "Limit warning (critical): " + "; ".join(notes) + ". Finish now: give your final answer."
        else:
            text = "Limit warning: " + "; ".join(notes) + ". Prioritize finishing the task and give your answer soon."
        warning = SystemPromptPart(text, metadata={WARNING_METADATA_KEY: True})
        await emit_event(self.event_callback, LimitWarningIssued(type(self).__name__, text))
        return [*cleaned, ModelRequest(parts=[warning])]

    async def _notes(self, messages: list[ModelMessage], run: RunInfo | None) -> tuple[list[str], bool]:
        """The notes of the limits that warn, and whether one of them is critical."""
        notes: list[str] = []
        critical = False
        limits = run.ctx.usage_limits if run else None
        iterations = self.max_iterations or (limits.request_limit if limits else None)
        if run is not None and iterations and "iterations" in self._warn_on:
            used = run.ctx.usage.requests + 1  # the request being prepared
            left = max(iterations - used + 1, 0)
            if used >= self.warn_at * iterations:
                notes.append(f"model request {used} of {iterations} ({left} left, this one included)")
                critical = critical or left <= self.critical_remaining_iterations
        total_limit = self.max_total_tokens or (limits.total_tokens_limit if limits else None)
        if run is not None and total_limit and "total_tokens" in self._warn_on:
            used_tokens = run.ctx.usage.total_tokens
            if used_tokens >= self.warn_at * total_limit:
                notes.append(f"{used_tokens:,} of {total_limit:,} total tokens used")
                critical = critical or used_tokens >= total_limit
        if "context_window" in self._warn_on:
            context = self.max_context_tokens or resolve_budget(
                None, self.model_name, 0, run, needed=True, assume_default=False
            )
            if context:
                size = await measure(messages, self.token_counter, run, context, None)
                if size.tokens >= self.warn_at * context:
                    notes.append(f"context {size.tokens:,} of {context:,} tokens ({size.tokens / context:.0%})")
                    critical = critical or size.tokens >= context
        return notes, critical
