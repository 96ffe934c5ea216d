"""The prompt cache in the cost figures: what each request read, wrote and sent uncached, and what each reduction
cost in cache re-writes against what it saved the requests after it.

`CostTrackingMiddleware` runs a `CacheSimulator` over the requests it sees and writes each one's figures on its
response (`CACHE_METADATA_KEY`, recorded with it); the ledger reads them back, live or from a stored session, so
`/cost`, the session report and `session_costs` all say the same.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal, cast

from ..cache import CachedRequest, CachePrices, CacheReport, CacheTokens, cache_prices, prompt_cache_for, rewrite_cost

__all__ = ["CACHE_METADATA_KEY", "CacheLedger", "CacheStamp", "ReductionEffect", "cache_stamp"]

CACHE_METADATA_KEY = "summarization_pydantic_ai.cache"
"""In a `ModelResponse.metadata`: the request as the prompt cache billed it (`CostTrackingMiddleware` writes it):
`read`, `write`, `uncached` tokens, `source` (`'reported'`: the provider's usage, `'estimated'`: the simulator's),
`predicted` (the simulator's `[read, write, uncached, write_1h]`), `model` (priced as), and for a request that
rewrote the history `changed_at`, `removed` (tokens) and `rewrite` (tokens written again)."""


def cache_stamp(result: CachedRequest, model: str) -> dict[str, Any]:
    """A `CachedRequest` as plain JSON, for `CACHE_METADATA_KEY`."""
    predicted = result.predicted
    stamp: dict[str, Any] = {
        "read": result.cache_read_tokens,
        "write": result.cache_write_tokens,
        "uncached": result.uncached_tokens,
        "source": result.source,
        "predicted": [
            predicted.cache_read_tokens,
            predicted.cache_write_tokens,
            predicted.uncached_tokens,
            result.cache_write_1h_tokens,
        ],
        "model": model,
        "warm": result.warm,
    }
    if result.changed_at is not None:
        stamp.update(changed_at=result.changed_at, removed=result.tokens_removed, rewrite=result.rewrite_tokens)
    return stamp


@dataclass(frozen=True)
class CacheStamp:
    """`CACHE_METADATA_KEY` read back (`None` from `parse` for anything malformed: never an error)."""

    tokens: CacheTokens
    source: Literal["reported", "estimated"]
    predicted: CacheTokens
    write_1h: int
    model: str
    changed_at: int | None = None
    tokens_removed: int = 0
    rewrite_tokens: int = 0
    warm: bool = True
    """The previous request's cache was still alive: a token it held would have been read at this request."""

    @classmethod
    def parse(cls, metadata: dict[str, Any] | None) -> CacheStamp | None:
        raw = (metadata or {}).get(CACHE_METADATA_KEY)
        if not isinstance(raw, dict):
            return None
        stamp = cast("dict[str, Any]", raw)
        predicted = stamp.get("predicted")
        counts = [stamp.get("read"), stamp.get("write"), stamp.get("uncached")]
        if not isinstance(predicted, list) or len(cast("list[Any]", predicted)) != 4:
            return None
        numbers = [*counts, *cast("list[Any]", predicted)]
        if not all(_count(n) for n in numbers) or stamp.get("source") not in ("reported", "estimated"):
            return None
        model = stamp.get("model")
        changed_at = stamp.get("changed_at")
        return cls(
            tokens=CacheTokens(*cast("list[int]", counts)),
            source=stamp["source"],
            predicted=CacheTokens(*cast("list[int]", predicted[:3])),
            write_1h=cast("int", predicted[3]),
            model=model if isinstance(model, str) else "",
            changed_at=changed_at if isinstance(changed_at, int) else None,
            tokens_removed=_int(stamp.get("removed")),
            rewrite_tokens=_int(stamp.get("rewrite")),
            warm=stamp.get("warm") is not False,
        )


@dataclass(frozen=True)
class ReductionEffect:
    """One rewrite of the history's cached prefix (a compaction, a cleared or compressed output, a window slide)
    and its net effect in dollars: what it saved the requests from it on, minus the cache re-write it caused.

    Estimates, from the simulator's token counts, against the same session without rewrites: `saved_usd` prices
    `tokens_removed` at each request from this one on as that session would have paid for them (the cache-read
    price while the cache was warm, the write or input price after it expired), `rewrite_cost_usd` prices
    `rewrite_tokens` at the write (or input) price less the read price they would otherwise have cost."""

    request: int
    """The agent request (1-based, in the session) that first went out rewritten."""
    changed_at: int
    """The index of the first message it changed (-1: the instructions or tools)."""
    tokens_removed: int
    rewrite_tokens: int
    rewrite_cost_usd: Decimal | None
    later_requests: int
    """The requests that carried the smaller context: this one and every one after it."""
    saved_usd: Decimal | None

    @property
    def net_usd(self) -> Decimal | None:
        """`saved_usd - rewrite_cost_usd`: negative when the reduction cost more than it saved."""
        if self.saved_usd is None or self.rewrite_cost_usd is None:
            return None
        return self.saved_usd - self.rewrite_cost_usd


@dataclass
class _Open:
    effect: ReductionEffect
    start: Decimal
    start_requests: int
    start_unpriced: int


@dataclass
class CacheLedger:
    """Running cache figures of the agent's requests, and the reductions seen so far."""

    _tokens: list[int] = field(default_factory=lambda: [0, 0, 0])
    _predicted: list[int] = field(default_factory=lambda: [0, 0, 0])
    _reported: list[int] = field(default_factory=lambda: [0, 0, 0])
    _predicted_on_reported: list[int] = field(default_factory=lambda: [0, 0, 0])
    _requests: int = 0
    _reported_requests: int = 0
    _output: int = 0
    _cost: Decimal | None = Decimal(0)
    _predicted_cost: Decimal | None = Decimal(0)
    _price_sum: Decimal = Decimal(0)
    """What a token held in the context cost each request so far, without rewrites (the cache-read price while
    warm), summed: the savings of a reduction are a difference of two sums."""
    _unpriced: int = 0
    _open: list[_Open] = field(default_factory=list[_Open])

    def add(self, stamp: CacheStamp, output_tokens: int) -> None:
        self._requests += 1
        self._output += output_tokens
        _add(self._tokens, stamp.tokens)
        _add(self._predicted, stamp.predicted)
        if stamp.source == "reported":
            self._reported_requests += 1
            _add(self._reported, stamp.tokens)
            _add(self._predicted_on_reported, stamp.predicted)
        prices = cache_prices(stamp.model) if stamp.model else None
        write_1h = stamp.write_1h if stamp.source == "estimated" else 0
        self._cost = _plus(self._cost, _cost(prices, stamp.tokens, output_tokens, write_1h))
        predicted = _cost(prices, stamp.predicted, output_tokens, stamp.write_1h)
        self._predicted_cost = _plus(self._predicted_cost, predicted)
        if stamp.changed_at is not None and (stamp.tokens_removed or stamp.rewrite_tokens):
            self._open_reduction(stamp, prices)
        if prices is None:
            self._unpriced += 1
        else:
            self._price_sum += prices.cache_read if stamp.warm else _miss_price(prices, stamp.model)

    def copy(self) -> CacheLedger:
        lists = {name: list(getattr(self, name)) for name in ("_tokens", "_predicted", "_reported")}
        return replace(self, **lists, _predicted_on_reported=list(self._predicted_on_reported), _open=list(self._open))

    def report(self) -> CacheReport:
        return CacheReport(
            requests=self._requests,
            tokens=CacheTokens(*self._tokens),
            output_tokens=self._output,
            cost_usd=self._cost,
            predicted=CacheTokens(*self._predicted),
            predicted_cost_usd=self._predicted_cost,
            reported_requests=self._reported_requests,
            reported=CacheTokens(*self._reported),
            predicted_on_reported=CacheTokens(*self._predicted_on_reported),
            rewrites=len(self._open),
        )

    def reductions(self) -> tuple[ReductionEffect, ...]:
        return tuple(self._effect(opened) for opened in self._open)

    def _open_reduction(self, stamp: CacheStamp, prices: CachePrices | None) -> None:
        cost = None
        if prices is not None:
            cost = rewrite_cost(prices, stamp.rewrite_tokens, write_premium=_premium(stamp.model))
        effect = ReductionEffect(
            self._requests, cast("int", stamp.changed_at), stamp.tokens_removed, stamp.rewrite_tokens, cost, 1, None
        )
        self._open.append(_Open(effect, self._price_sum, self._requests - 1, self._unpriced))

    def _effect(self, opened: _Open) -> ReductionEffect:
        effect = opened.effect
        saved = None
        if effect.rewrite_cost_usd is not None and self._unpriced == opened.start_unpriced:
            saved = effect.tokens_removed * (self._price_sum - opened.start)
        return replace(effect, later_requests=self._requests - opened.start_requests, saved_usd=saved)


@functools.lru_cache(maxsize=64)
def _premium(model: str) -> bool:
    return prompt_cache_for(model).write_premium


def _miss_price(prices: CachePrices, model: str) -> Decimal:
    """What a token costs a request that missed the cache: written again (at the write price, with a premium)."""
    return prices.cache_write if _premium(model) else prices.input


def _plus(total: Decimal | None, cost: Decimal | None) -> Decimal | None:
    return None if total is None or cost is None else total + cost


def _add(total: list[int], tokens: CacheTokens) -> None:
    total[0] += tokens.cache_read_tokens
    total[1] += tokens.cache_write_tokens
    total[2] += tokens.uncached_tokens


def _cost(prices: CachePrices | None, tokens: CacheTokens, output: int, write_1h: int) -> Decimal | None:
    if prices is None:
        return None
    return prices.cost(
        uncached=tokens.uncached_tokens,
        cache_read=tokens.cache_read_tokens,
        cache_write=tokens.cache_write_tokens - write_1h,
        cache_write_1h=write_1h,
        output=output,
    )


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _int(value: object) -> int:
    return value if _count(value) else 0  # type: ignore[return-value]
