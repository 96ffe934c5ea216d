"""The cost events: a request priced (`CostRecorded`), a budget nearly spent (`BudgetWarningIssued`) or refused
(`BudgetExceeded`); see Cost tracking. Part of `ContextEvent` and importable from `_events` like the others."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, TypeAlias

__all__ = ["BudgetExceeded", "BudgetName", "BudgetWarningIssued", "CostRecorded"]


@dataclass(frozen=True)
class CostRecorded:
    """A model request was priced (the agent's, a summarizer call, or an overflow retry); see Cost tracking."""

    processor: str
    kind: Literal["agent", "summarizer", "overflow_retry"]
    model: str
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: Decimal | None
    """`None`: the model is unknown to genai-prices (the cost is unknown, not 0)."""
    run_cost_usd: Decimal | None
    session_cost_usd: Decimal | None
    run_tokens: int
    session_tokens: int
    uncached_tokens: int | None = None
    """Input tokens neither read from nor written to the prompt cache (`None` when not simulated)."""
    cache_source: Literal["reported", "estimated"] | None = None
    """Whether `cache_read_tokens` / `cache_write_tokens` / `uncached_tokens` are the provider's figures or the
    prompt-cache simulator's estimate (the provider reported none)."""


BudgetName: TypeAlias = Literal["max_cost_usd", "max_tokens_total", "session_max_cost_usd", "session_max_tokens_total"]


@dataclass(frozen=True)
class BudgetWarningIssued:
    """The spend reached `warn_fraction` of a budget (once per budget per run)."""

    processor: str
    budget: BudgetName
    limit: Decimal | int
    spent: Decimal | int
    text: str


@dataclass(frozen=True)
class BudgetExceeded:
    """A request was refused: sending it would pass a budget. The run stops with `BudgetExceededError`."""

    processor: str
    budget: BudgetName
    limit: Decimal | int
    spent: Decimal | int
    estimated_request: Decimal | int
    """What the refused request was estimated to add (USD or tokens)."""
    request: int
    """The refused request's number in the run (1 is the first)."""
