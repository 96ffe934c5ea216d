"""What a model charges for input, cache reads, cache writes and output: from genai-prices, per token.

`CachePrices` states the per-token rates (the base tier: what a request under any tiered threshold pays) and
prices a whole request with genai-prices itself (`cost`), so tiers above 200k tokens and the 1-hour write rate
are priced exactly as the cost middleware prices a real response.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from genai_prices import data_snapshot

from .._windows import PROVIDER_ALIASES

__all__ = ["CachePrices", "cache_prices", "rewrite_cost"]

_PER_MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class CachePrices:
    """Per-token prices of one model in USD, and the price of a request (`cost`).

    `derived` names the rates genai-prices does not list for the model, and what they were taken as: a
    provider with no write premium (OpenAI, Google's implicit cache, DeepSeek) has `cache_write = input`; a
    model with no cache discount has `cache_read = input`; no 1-hour rate means `cache_write_1h = cache_write`.

    Example:
        ```python
        prices = cache_prices('anthropic:claude-sonnet-4-5')
        assert prices.cache_read == prices.input / 10
        ```
    """

    model: str
    """The model as genai-prices knows it (`'claude-sonnet-4-5'`)."""
    provider: str
    """The genai-prices provider id (`'anthropic'`)."""
    input: Decimal
    cache_read: Decimal
    cache_write: Decimal
    """A 5-minute cache write (Anthropic's default retention)."""
    cache_write_1h: Decimal
    output: Decimal
    derived: tuple[str, ...] = ()
    _tiers: dict[str, tuple[tuple[int, Decimal], ...]] = field(
        default_factory=dict[str, tuple[tuple[int, Decimal], ...]], repr=False, compare=False
    )
    """Per rate with tiers: `(start, price per token)` of each tier, ascending (genai-prices' tiers)."""
    _tiered_from: int | None = field(default=None, repr=False, compare=False)
    """The input size above which a higher tier applies (`None`: no tiers)."""

    def cost(
        self, *, uncached: int = 0, cache_read: int = 0, cache_write: int = 0, output: int = 0, cache_write_1h: int = 0
    ) -> Decimal:
        """The price of one request in USD: `uncached` input tokens at the input price, `cache_read` at the read
        price, `cache_write` at the 5-minute write price (`cache_write_1h` more at the 1-hour price), `output`
        at the output price. Above a tier threshold of genai-prices (200k input tokens on some models) every
        token of the request pays that tier's rate, as genai-prices prices it."""
        counts = (uncached, cache_read, cache_write, output, cache_write_1h)
        if any(count < 0 for count in counts):
            raise ValueError(f"token counts cannot be negative, got {counts}")
        total = uncached + cache_read + cache_write + cache_write_1h
        if self._tiered_from is not None and total > self._tiered_from:
            rates = {key: rate for key, tiers in self._tiers.items() if (rate := _tier_rate(tiers, total)) is not None}
            return (
                uncached * rates.get("input", self.input)
                + cache_read * rates.get("cache_read", self.cache_read)
                + cache_write * rates.get("cache_write", self.cache_write)
                + cache_write_1h * rates.get("cache_write_1h", self.cache_write_1h)
                + output * rates.get("output", self.output)
            )
        return (
            uncached * self.input
            + cache_read * self.cache_read
            + cache_write * self.cache_write
            + cache_write_1h * self.cache_write_1h
            + output * self.output
        )

    @property
    def read_multiplier(self) -> Decimal:
        """The cache-read price as a fraction of the input price (0.1 on Anthropic)."""
        return self.cache_read / self.input if self.input else Decimal(1)

    @property
    def write_multiplier(self) -> Decimal:
        """The 5-minute write price as a multiple of the input price (1.25 on Anthropic, 1 without a premium)."""
        return self.cache_write / self.input if self.input else Decimal(1)


def rewrite_cost(prices: CachePrices, tokens_after_cut: int, *, write_premium: bool = True) -> Decimal:
    """What the next request pays more, in USD, when a rewrite invalidates the `tokens_after_cut` tokens that
    follow it: they would have been read from the cache and are now written to it again (`write_premium=False`
    for a cache that bills new tokens as plain input: OpenAI, Google, DeepSeek).

    Example:
        ```python
        prices = cache_prices('anthropic:claude-sonnet-4-5')
        extra = rewrite_cost(prices, 40_000)  # 40k tokens at 1.25x instead of 0.1x: $0.138
        ```
    """
    if tokens_after_cut < 0:
        raise ValueError(f"tokens_after_cut cannot be negative, got {tokens_after_cut}")
    paid = prices.cache_write if write_premium else prices.input
    return tokens_after_cut * (paid - prices.cache_read)


def cache_prices(model_name: str, *, at: datetime | None = None) -> CachePrices | None:
    """The per-token prices of `model_name` (`'anthropic:claude-sonnet-4-5'`, or a bare name) from genai-prices;
    `None` for a model it does not know (never a guess)."""
    provider, sep, model_ref = model_name.partition(":")
    if not sep:
        provider, model_ref = "", model_name
    return _lookup(PROVIDER_ALIASES.get(provider, provider) or None, model_ref, at)


@functools.lru_cache(maxsize=256)
def _lookup(provider_id: str | None, model_ref: str, at: datetime | None) -> CachePrices | None:
    snapshot = data_snapshot.get_snapshot()
    for candidate in (provider_id, None) if provider_id else (None,):
        try:
            provider, model = snapshot.find_provider_model(model_ref, None, candidate, None)
        except LookupError:
            continue
        return _prices_of(model.id, provider.id, model.get_prices(at or datetime.now(tz=UTC)))
    return None


def _prices_of(model: str, provider: str, price: Any) -> CachePrices | None:
    rates: dict[str, Decimal | None] = {
        key: _base(getattr(price, f"{key}_mtok", None))
        for key in ("input", "cache_read", "cache_write", "cache_write_1h", "output")
    }
    base_input = rates["input"]
    if base_input is None:
        return None  # priced per request or per character: nothing per token to simulate with
    derived: list[str] = []
    for key, fallback_key in (("cache_read", "input"), ("cache_write", "input"), ("cache_write_1h", "cache_write")):
        if rates[key] is None:
            rates[key] = rates[fallback_key]
            derived.append(f"{key}={fallback_key}")
    output = rates["output"] if rates["output"] is not None else Decimal(0)
    tiers = {key: steps for key in rates if (steps := _tier_steps(getattr(price, f"{key}_mtok", None)))}
    return CachePrices(
        model=model,
        provider=provider,
        input=base_input / _PER_MILLION,
        cache_read=_per_token(rates["cache_read"]),
        cache_write=_per_token(rates["cache_write"]),
        cache_write_1h=_per_token(rates["cache_write_1h"]),
        output=output / _PER_MILLION,
        derived=tuple(derived),
        _tiers=tiers,
        _tiered_from=min((start for steps in tiers.values() for start, _ in steps), default=None),
    )


def _tier_steps(value: object) -> tuple[tuple[int, Decimal], ...]:
    """A `TieredPrices`' tiers as `(start, price per token)`, ascending; `()` for a flat price."""
    tiers = getattr(value, "tiers", None) or ()
    return tuple(sorted((tier.start, tier.price / _PER_MILLION) for tier in tiers))


def _tier_rate(steps: tuple[tuple[int, Decimal], ...], total_input: int) -> Decimal | None:
    """genai-prices' cliff: above a tier's start, every token of the request pays that tier's price."""
    rate = None
    for start, price in steps:
        if total_input > start:
            rate = price
    return rate


def _base(value: object) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, Decimal):
        return value
    base = getattr(value, "base", None)  # TieredPrices: the rate below the first threshold
    return base if isinstance(base, Decimal) else None


def _per_token(value: Decimal | None) -> Decimal:
    return (value or Decimal(0)) / _PER_MILLION
