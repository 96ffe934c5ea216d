"""`CacheReport`: a session's requests as the prompt cache billed them, totalled."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from ._billed import CachedRequest, CacheTokens

__all__ = ["CacheReport"]


@dataclass(frozen=True)
class CacheReport:
    """Totals over requests: tokens read, written and uncached, the cost, the cache-read share, and, for the
    requests whose provider reported usage, the simulator's prediction beside the provider's figures.

    Example:
        ```python
        report = CacheReport.of(simulator.simulate(requests))
        print(f'{report.cache_read_share:.0%} of input read from the cache, {report.cost_usd}')
        ```
    """

    requests: int = 0
    tokens: CacheTokens = field(default_factory=CacheTokens)
    """The headline figures: the provider's where reported, else the simulator's."""
    output_tokens: int = 0
    cost_usd: Decimal | None = Decimal(0)
    """`None` when any request is unpriced."""
    predicted: CacheTokens = field(default_factory=CacheTokens)
    """The simulator's prediction for every request."""
    predicted_cost_usd: Decimal | None = Decimal(0)
    reported_requests: int = 0
    reported: CacheTokens = field(default_factory=CacheTokens)
    """The provider's figures, summed over the `reported_requests`."""
    predicted_on_reported: CacheTokens = field(default_factory=CacheTokens)
    """The prediction for those same requests: compare it with `reported`."""
    rewrites: int = 0
    """Requests that changed an earlier part of the history (or the instructions or tools)."""

    @classmethod
    def of(cls, requests: Iterable[CachedRequest]) -> CacheReport:
        count = reported_count = rewrites = output = 0
        tokens, predicted, reported, predicted_on_reported = _Sum(), _Sum(), _Sum(), _Sum()
        cost: Decimal | None = Decimal(0)
        predicted_cost: Decimal | None = Decimal(0)
        for request in requests:
            count += 1
            output += request.output_tokens
            rewrites += request.changed_at is not None
            tokens.add(request.cache_read_tokens, request.cache_write_tokens, request.uncached_tokens)
            predicted.add_tokens(request.predicted)
            cost = _plus(cost, request.cost_usd)
            predicted_cost = _plus(predicted_cost, request.predicted_cost_usd)
            if request.reported is not None:
                reported_count += 1
                reported.add_tokens(request.reported)
                predicted_on_reported.add_tokens(request.predicted)
        return cls(
            requests=count,
            tokens=tokens.total(),
            output_tokens=output,
            cost_usd=cost,
            predicted=predicted.total(),
            predicted_cost_usd=predicted_cost,
            reported_requests=reported_count,
            reported=reported.total(),
            predicted_on_reported=predicted_on_reported.total(),
            rewrites=rewrites,
        )

    @property
    def input_tokens(self) -> int:
        return self.tokens.input_tokens

    @property
    def cache_read_share(self) -> float:
        """The fraction of input tokens read from the cache (0.0 with no input)."""
        return _share(self.tokens)

    @property
    def predicted_cache_read_share(self) -> float:
        return _share(self.predicted)


class _Sum:
    __slots__ = ("read", "uncached", "write")

    def __init__(self) -> None:
        self.read = self.write = self.uncached = 0

    def add(self, read: int, write: int, uncached: int) -> None:
        self.read += read
        self.write += write
        self.uncached += uncached

    def add_tokens(self, tokens: CacheTokens) -> None:
        self.add(tokens.cache_read_tokens, tokens.cache_write_tokens, tokens.uncached_tokens)

    def total(self) -> CacheTokens:
        return CacheTokens(self.read, self.write, self.uncached)


def _plus(total: Decimal | None, cost: Decimal | None) -> Decimal | None:
    return None if total is None or cost is None else total + cost


def _share(tokens: CacheTokens) -> float:
    return tokens.cache_read_tokens / tokens.input_tokens if tokens.input_tokens else 0.0
