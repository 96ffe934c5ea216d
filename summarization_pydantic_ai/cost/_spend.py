"""What was spent: `Spend` (tokens and USD of some requests) and `CostTotals` (overall, by kind, and saved)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from pydantic_ai.usage import RequestUsage

from ..cache import CacheReport
from ._cache import ReductionEffect
from ._records import RequestKind

__all__ = ["CompactionSaving", "CostTotals", "Spend", "format_cost"]


@dataclass(frozen=True)
class Spend:
    """Tokens and cost of a set of model requests. Add two with `+`.

    `input_tokens` counts every input token, cached ones included (as pydantic-ai's `RequestUsage` does);
    `cache_read_tokens` and `cache_write_tokens` say how many of them were read from or written to a cache."""

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal | None = Decimal(0)
    """`None` when any of the requests is unpriced (a model genai-prices does not know): unknown, never 0."""
    requests: int = 0
    unpriced_requests: int = 0
    known_cost_usd: Decimal = Decimal(0)
    """The cost of the priced requests alone: a lower bound when `cost_usd` is unknown."""

    @classmethod
    def of(cls, usage: RequestUsage, cost_usd: Decimal | None) -> Spend:
        """One request: its usage and its price (`None` when unknown)."""
        return cls(
            input_tokens=usage.input_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=cost_usd,
            requests=1,
            unpriced_requests=0 if cost_usd is not None else 1,
            known_cost_usd=cost_usd or Decimal(0),
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens (what `max_tokens_total` budgets)."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Spend) -> Spend:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Spend(
            input_tokens=self.input_tokens + other.input_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=cost,
            requests=self.requests + other.requests,
            unpriced_requests=self.unpriced_requests + other.unpriced_requests,
            known_cost_usd=self.known_cost_usd + other.known_cost_usd,
        )


@dataclass(frozen=True)
class CompactionSaving:
    """What one compaction saved: the tokens it removed from the working context, no longer sent with each
    later request (an estimate: our token count, priced at each later request's input price)."""

    summary_id: str | None
    tokens_removed: int
    later_requests: int
    """The agent's requests after the compaction (in this history) that were spared those tokens."""
    saved_usd: Decimal | None
    """`tokens_removed` at the input price of each later request, summed; `None` when a model is unpriced."""


@dataclass(frozen=True)
class CostTotals:
    """The spend of a run or a session: overall (`total`), by kind, and what compaction saved."""

    agent: Spend = field(default_factory=Spend)
    """The agent's own requests."""
    summarizer: Spend = field(default_factory=Spend)
    """The calls a summarizer made to write the summaries."""
    overflow_retry: Spend = field(default_factory=Spend)
    """Requests retried after the provider rejected them as too long (see Overflow recovery)."""
    savings: tuple[CompactionSaving, ...] = ()
    unpriced_models: tuple[str, ...] = ()
    """Models genai-prices does not know (their requests are counted in tokens, their cost is unknown)."""
    cache: CacheReport = field(default_factory=CacheReport)
    """The agent's requests as the prompt cache billed them: read, written, uncached (the provider's figures where
    it reported them, else the simulator's estimate) and the cost with the cache counted (see Prompt caching)."""
    reductions: tuple[ReductionEffect, ...] = ()
    """Each rewrite of the history's cached prefix, with what it saved and the cache re-write it cost."""

    @property
    def total(self) -> Spend:
        """Every request together: the agent's, the summarizer's and the overflow retries."""
        return self.agent + self.summarizer + self.overflow_retry

    @property
    def by_kind(self) -> dict[RequestKind, Spend]:
        return {"agent": self.agent, "summarizer": self.summarizer, "overflow_retry": self.overflow_retry}

    @property
    def tokens_saved(self) -> int:
        """Tokens not sent thanks to compaction: each removal times the requests that followed it."""
        return sum(s.tokens_removed * s.later_requests for s in self.savings)

    @property
    def saved_usd(self) -> Decimal | None:
        """The estimated cost of `tokens_saved`; `None` when a later request's model is unpriced."""
        total = Decimal(0)
        for saving in self.savings:
            if saving.saved_usd is None:
                return None
            total += saving.saved_usd
        return total

    @property
    def reductions_saved_usd(self) -> Decimal | None:
        """What the reductions saved the requests after them (the prompt cache counted); `None` when unpriced."""
        return _total(r.saved_usd for r in self.reductions)

    @property
    def rewrite_cost_usd(self) -> Decimal | None:
        """What the cache re-writes the reductions caused cost; `None` when a model is unpriced."""
        return _total(r.rewrite_cost_usd for r in self.reductions)

    @property
    def net_saved_usd(self) -> Decimal | None:
        """What the reductions saved, net of the cache re-writes they caused (negative: they cost more);
        `None` when a model is unpriced."""
        return _total(r.net_usd for r in self.reductions)


def _total(amounts: Iterable[Decimal | None]) -> Decimal | None:
    total = Decimal(0)
    for amount in amounts:
        if amount is None:
            return None
        total += amount
    return total


def format_cost(cost: Decimal | Spend | CostTotals | None, *, signed: bool = False) -> str:
    """A cost for people: `'$0.0123'`, `'$12.35'`, `'unknown'`, or with unpriced requests
    `'≥ $0.0123 (2 requests unpriced)'`. `signed=True` shows a saving's sign: `'+$0.0123'`, `'-$0.50'`."""
    if signed and isinstance(cost, Decimal) and cost != 0:
        return ("-" if cost < 0 else "+") + _usd(abs(cost))
    if isinstance(cost, CostTotals):
        cost = cost.total
    if isinstance(cost, Spend):
        if cost.cost_usd is None:
            if cost.unpriced_requests == cost.requests:
                return "unknown"
            unpriced = cost.unpriced_requests
            return f"≥ {_usd(cost.known_cost_usd)} ({unpriced} request{'s' if unpriced != 1 else ''} unpriced)"
        cost = cost.cost_usd
    if cost is None:
        return "unknown"
    return _usd(cost)


def _usd(amount: Decimal) -> str:
    if amount == 0:
        return "$0.00"
    places = Decimal("0.01") if abs(amount) >= 1 else Decimal("0.0001") if abs(amount) >= Decimal("0.0001") else None
    if places is None:
        return f"${amount:.6f}"  # a fraction of a cent: its first significant digits
    return f"${amount.quantize(places, rounding=ROUND_HALF_UP):,}"
