"""What one request was billed by the prompt cache (`CachedRequest`) and its token split (`CacheTokens`): what the
simulator produces and the report totals."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

__all__ = ["CacheTokens", "CachedRequest"]


@dataclass(frozen=True)
class CacheTokens:
    """How a request's input tokens were billed: read from the cache, written to it, or sent uncached."""

    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    uncached_tokens: int = 0

    @property
    def input_tokens(self) -> int:
        """Every input token (as pydantic-ai's `RequestUsage.input_tokens` counts them)."""
        return self.cache_read_tokens + self.cache_write_tokens + self.uncached_tokens


@dataclass(frozen=True)
class CachedRequest:
    """One request as the prompt cache billed it.

    The headline figures (`cache_read_tokens`, ..., `cost_usd`) are the provider's when it reported usage
    (`source='reported'`), else the simulator's (`source='estimated'`); `predicted` is always the simulator's,
    so the two can be read side by side.
    """

    index: int
    """0 for the first request the simulator saw."""
    cache_read_tokens: int
    cache_write_tokens: int
    uncached_tokens: int
    output_tokens: int
    cost_usd: Decimal | None
    """`None` when the model is unpriced (never 0)."""
    source: Literal["reported", "estimated"]
    predicted: CacheTokens
    predicted_cost_usd: Decimal | None
    reported: CacheTokens | None = None
    established_tokens: int = 0
    """The cached prefix the previous request left (what this one could at most have read back)."""
    changed_at: int | None = None
    """The index of the first message that differs from the previous request's (a rewrite), `None` when the
    history only grew; -1 when the instructions or tools changed."""
    tokens_removed: int = 0
    """With `changed_at`: the tokens the rewrite took out of the context (new messages aside)."""
    rewrite_tokens: int = 0
    """With `changed_at`: the tokens written (or sent uncached) again that an intact prefix would have let this
    request read (0 when the cache had expired anyway)."""
    seconds_since_previous: float | None = None
    cache_write_1h_tokens: int = 0
    """Of the predicted writes, those at the 1-hour TTL (Anthropic)."""
    warm: bool = False
    """The cache the previous request left was still alive when this one was sent (False for the first)."""

    @property
    def input_tokens(self) -> int:
        return self.cache_read_tokens + self.cache_write_tokens + self.uncached_tokens

    @property
    def missed_tokens(self) -> int:
        """Tokens of the established prefix not read back (0 when all of it was)."""
        return max(0, self.established_tokens - self.cache_read_tokens)
