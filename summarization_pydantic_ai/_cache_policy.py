"""`CachePolicy`: when a planned reduction pays for the prompt-cache re-write it causes.

Providers bill a cached prefix at a fraction of the input price (Anthropic reads at 0.1x and writes at 1.25x;
OpenAI reads at 0.5x or less, with no write premium). A reduction that rewrites the history after its first
message (a slide, a summary, a checkpoint, an output rewritten after it was sent) turns every token after the cut
into a cache write on the next request. Reducing often keeps each request small but re-writes the kept part each
time; reducing rarely reads a larger prefix on every request. For a session growing by `g` tokens per request that
keeps `K` tokens after each reduction, the cost per request of reducing at `H` is about

    write * g * K / (H - L)  +  write * g  +  read * (L + H) / 2

(the rewrite spread over the cycle, the new tokens, the prefix read back), smallest at
`H - L = sqrt(2 * write * g * K / read)`: the economic order quantity of the cache. The policy plans reductions
there, never earlier than the step's own trigger, never closer than `min_interval` requests of growth (each
rewrite also delays the first token: the kept part is prefilled again), and always by `limit` of the budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse

from ._estimate import approx_message_tokens
from ._messages import is_summary_message
from ._sizes import ContextSize, Measure, keep_tokens
from .cache import cache_prices

__all__ = ["CachePolicy", "measured_growth", "responses_since_reduction"]

_GROWTH_REQUESTS = 12
"""Requests the growth is measured over (the most recent ones since the latest reduction)."""


@dataclass(frozen=True)
class CachePolicy:
    """Decide when a reduction is due by what it costs with the provider's prompt cache counted.

    Pass one to the reducing steps (`SlidingWindowProcessor`, `SummarizationProcessor`,
    `ClearToolResultsProcessor`, `ImportancePruner`, `PhaseCheckpoints`, `ContextManagerMiddleware`): a step whose
    token trigger is reached then waits until the reduction pays for its cache re-write (see the module's
    formula), and reduces at once when the request reaches `limit` of the budget. `ContextConfig` presets and
    `create_deep_agent` use one by default. Prices are relative to the uncached input price.

    Example:
        ```python
        policy = CachePolicy.for_model('anthropic:claude-sonnet-4-5')
        window = SlidingWindowProcessor(trigger=('fraction', 0.6), keep=('fraction', 0.15), cache_policy=policy)
        ```
    """

    cache_read: float = 0.1
    """The price of a token read from the cache, relative to an uncached input token (Anthropic: 0.1)."""
    cache_write: float = 1.25
    """The price of a token written to the cache, relative to an uncached input token (Anthropic 5-minute: 1.25;
    providers with automatic caching: 1.0)."""
    limit: float = 0.95
    """The fraction of the budget where a reduction is forced, whatever it costs."""
    min_interval: int = 20
    """The fewest requests between two planned reductions (at most 5 cache re-writes per 100 requests): counted
    since the latest summary or window marker, and as that many requests of measured growth; only the limit
    reduces sooner. 0: the cost formula alone decides."""
    thin: bool = True
    """In a planned reduction, thin what it keeps (see `thin_outputs`): superseded outputs (a file read again or
    changed later, an older page snapshot) become pointers, older outputs above `thin_chars` keep their ends. The
    reduction rewrites that part anyway; the reduction then reaches further back for the same tokens."""
    thin_chars: int = 160
    """The most an older tool output keeps in a planned reduction (head and tail), in characters."""

    def __post_init__(self) -> None:
        for name in ("cache_read", "cache_write"):
            value: Any = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 10:
                raise ValueError(f"{name} must be a price ratio in (0, 10], got {value!r}")
        limit: Any = self.limit
        if isinstance(limit, bool) or not isinstance(limit, int | float) or not 0 < limit <= 1:
            raise ValueError(f"limit must be a fraction of the budget in (0, 1], got {limit!r}")
        for name, least in (("min_interval", 0), ("thin_chars", 80)):
            count: Any = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, int) or count < least:
                raise ValueError(f"{name} must be an int >= {least}, got {count!r}")

    @classmethod
    def for_model(cls, model: Any, **overrides: Any) -> CachePolicy:
        """The policy with `model`'s cache prices (genai-prices: cache read and write against input); Anthropic's
        ratios when they are unknown. `overrides` set the other fields."""
        ratios = _cache_ratios(model)
        read, write = ratios if ratios is not None else (cls.cache_read, cls.cache_write)
        return cls(cache_read=read, cache_write=write, **overrides)

    def trigger_tokens(self, *, trigger: int, low_water: int, growth: float, budget: int | None) -> int:
        """Where a planned reduction from `trigger` down to `low_water` tokens should fire, for a session growing
        by `growth` tokens per request: the cheapest cycle (module docstring), at least `min_interval` requests
        long, never below `trigger`, never above `limit` of `budget`."""
        kept = max(low_water, 0)
        span = math.sqrt(2 * self.cache_write * max(growth, 0.0) * kept / self.cache_read)
        planned = max(kept + span, kept + self.min_interval * max(growth, 0.0), trigger)
        ceiling = self.hard_limit(budget)
        return int(planned) if ceiling is None else min(int(planned), ceiling)

    def due(self, messages: Sequence[ModelMessage], size: Measure, trigger: ContextSize, keep: ContextSize) -> bool:
        """Whether a step that reduces from `trigger` down to `keep` should reduce `messages` (measured as `size`)
        now. A message-count trigger is taken as it is; a token or fraction trigger is moved to where the
        reduction pays for its cache re-write (`planned_threshold`)."""
        threshold = size.token_threshold(trigger)
        if threshold is None:
            return size.reaches(trigger)
        return size.tokens >= self.planned_threshold(messages, size, threshold, keep)

    def planned_threshold(
        self, messages: Sequence[ModelMessage], size: Measure, threshold: int, keep: ContextSize
    ) -> int:
        """`trigger_tokens` for `messages`: the low-water mark from `keep` (a message keep: the tokens of those
        messages), the growth measured on the history."""
        low_water = keep_tokens(keep, size.budget)
        if low_water is None:
            count = int(keep[1])
            low_water = sum(approx_message_tokens(m) for m in messages[-count:]) if count else 0
        growth = measured_growth(messages)
        planned = self.trigger_tokens(trigger=threshold, low_water=low_water, growth=growth, budget=size.budget)
        ceiling = self.hard_limit(size.budget)
        since = responses_since_reduction(messages)
        if ceiling is not None and since is not None and since < self.min_interval:
            return max(planned, ceiling)  # the previous reduction is too recent: only the limit forces another
        return planned

    def hard_limit(self, budget: int | None) -> int | None:
        """`limit` of `budget` in tokens (`None` without a budget)."""
        return None if budget is None else int(self.limit * budget)

    def rewrite_cost(self, rewritten_tokens: int) -> float:
        """The extra price of re-writing `rewritten_tokens` that the next request would otherwise have read from
        the cache, in uncached-input-token units."""
        return max(rewritten_tokens, 0) * (self.cache_write - self.cache_read)


def measured_growth(messages: Sequence[ModelMessage], *, requests: int = _GROWTH_REQUESTS) -> float:
    """Tokens the history grew by per model request, over its latest `requests` responses after the latest
    summary or window marker (approximate estimate; 0.0 when there is no response to measure)."""
    responses = 0
    tokens = 0
    for message in reversed(messages):
        if is_summary_message(message):
            break
        tokens += approx_message_tokens(message)
        if isinstance(message, ModelResponse):
            responses += 1
            if responses == requests:
                break
    return tokens / responses if responses else 0.0


def responses_since_reduction(messages: Sequence[ModelMessage]) -> int | None:
    """Model responses after the latest summary or window marker (`None` when the history has none: it was never
    reduced). `min_interval` counts these: growth measured in tokens lets a small kept part look "20 requests"
    away after a handful of requests."""
    responses = 0
    for message in reversed(messages):
        if is_summary_message(message):
            return responses
        responses += isinstance(message, ModelResponse)
    return None


def _cache_ratios(model: Any) -> tuple[float, float] | None:
    """(cache read, cache write) relative to the input price, from genai-prices; `None` when unknown."""
    name = model if isinstance(model, str) else getattr(model, "model_name", None)
    if not isinstance(name, str) or not name:
        return None
    system = getattr(model, "system", None)
    if ":" not in name and isinstance(system, str) and system:
        name = f"{system}:{name}"
    prices = cache_prices(name)
    if prices is None or not 0 < prices.read_multiplier < 1:
        return None  # unknown, or no cache discount: the defaults are the safer guess
    return float(prices.read_multiplier), max(float(prices.write_multiplier), 1.0)
