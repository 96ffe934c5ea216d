"""Budgets: the limits, the estimate of the next request, and the error that stops a run before it passes one."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import RequestUsage

from .._cost_events import BudgetName
from ._pricing import price_usage
from ._spend import Spend, format_cost

__all__ = ["BudgetExceededError", "Limit", "NextRequest", "amount_text", "estimate_next", "limits_of"]


class BudgetExceededError(RuntimeError):
    """A run was stopped before a request that would pass a budget; the request was not sent.

    `messages` is the run's history at that point, intact and valid (it ends with the request that was not
    sent): continue with `agent.run(None, message_history=error.messages)` and a larger budget."""

    def __init__(
        self,
        *,
        budget: BudgetName,
        limit: Decimal | int,
        spent: Decimal | int,
        estimated_request: Decimal | int,
        request: int,
        messages: list[ModelMessage],
    ) -> None:
        self.budget: BudgetName = budget
        self.limit = limit
        self.spent = spent
        self.estimated_request = estimated_request
        self.request = request
        """The refused request's number in the run (1: the run's first request)."""
        self.messages = messages
        show = amount_text
        scope = "session" if budget.startswith("session") else "run"
        super().__init__(
            f"{budget}={show(limit)} would be passed: this {scope} has spent {show(spent)}, and request "
            f"{request} of the run (estimated at {show(estimated_request)}) was not sent. The history is intact: "
            "continue with message_history=error.messages and a larger budget."
        )


def amount_text(value: Decimal | int) -> str:
    """A budget amount for people: dollars for a `Decimal`, tokens for an `int`."""
    return format_cost(value) if isinstance(value, Decimal) else f"{value:,} tokens"


@dataclass(frozen=True)
class Limit:
    """One budget to check before each request."""

    name: BudgetName
    limit: Decimal | int

    @property
    def is_cost(self) -> bool:
        return isinstance(self.limit, Decimal)

    def spent(self, run: Spend, session: Spend) -> Decimal | int:
        spend = session if self.name.startswith("session") else run
        return spend.known_cost_usd if self.is_cost else spend.total_tokens


def limits_of(owner: Any) -> tuple[Limit, ...]:
    """The budgets set on a `CostTrackingMiddleware`, checked (positive numbers) and in USD as `Decimal`."""
    limits: list[Limit] = []
    for name in ("max_cost_usd", "session_max_cost_usd"):
        value = getattr(owner, name)
        if value is not None:
            limits.append(Limit(name, _usd(name, value)))
    for name in ("max_tokens_total", "session_max_tokens_total"):
        value = getattr(owner, name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
            limits.append(Limit(name, value))
    return tuple(limits)


def _usd(name: str, value: object) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | str):
        raise TypeError(f"{name} must be a number of US dollars, got {value!r}")
    try:
        amount = Decimal(str(value))
    except ArithmeticError:
        raise ValueError(f"{name} must be a number of US dollars, got {value!r}") from None
    if not amount.is_finite() or amount <= 0:
        raise ValueError(f"{name} must be a positive number of US dollars, got {value!r}")
    return amount


@dataclass(frozen=True)
class NextRequest:
    """What the request about to be sent is expected to cost."""

    tokens: int
    cost_usd: Decimal | None

    def amount(self, limit: Limit) -> Decimal | int:
        return (self.cost_usd or Decimal(0)) if limit.is_cost else self.tokens


def estimate_next(
    context_tokens: int, last: tuple[RequestUsage, int] | None, model: str | None, provider: str | None
) -> NextRequest:
    """The next request: what the provider counted for the previous one plus what our count says the context
    grew by since (less after a compaction), with the previous answer's length and cache share; priced like it.
    The first request of a run: our count alone."""
    if last is None:
        usage = RequestUsage(input_tokens=context_tokens)
    else:
        previous, counted_then = last
        input_tokens = max(previous.input_tokens + context_tokens - counted_then, 1)
        cached = previous.cache_read_tokens / previous.input_tokens if previous.input_tokens else 0.0
        usage = RequestUsage(
            input_tokens=input_tokens,
            cache_read_tokens=min(int(input_tokens * cached), input_tokens),
            output_tokens=previous.output_tokens,
        )
    return NextRequest(usage.input_tokens + usage.output_tokens, price_usage(usage, model, provider, warn=False))
