"""Prompt caching: how each provider family caches a request and prices it, and a simulator that replays a
session's requests through that cache.

A reduction that rewrites the middle of a history makes every token after it a cache miss on the next request:
priced as a write (1.25x the input price on Anthropic) instead of a read (0.1x). `CacheSimulator` says what each
request read, wrote and sent uncached, and what it cost; `rewrite_cost` what a planned rewrite will add.

Example:
    ```python
    simulator = CacheSimulator.for_model('anthropic:claude-sonnet-4-5')
    result = simulator.add(SentRequest(messages, instructions='Be brief.'))
    result.cache_read_tokens, result.cache_write_tokens, result.cost_usd
    ```
"""

from ._prices import CachePrices, cache_prices, rewrite_cost
from ._prompt_cache import CacheFamily, NoPromptCache, PromptCache
from ._providers import (
    AnthropicPromptCache,
    DeepSeekPromptCache,
    GooglePromptCache,
    OpenAIPromptCache,
    prompt_cache_for,
)
from ._report import CacheReport
from ._request import SentRequest
from ._simulator import CachedRequest, CacheSimulator, CacheTokens

__all__ = [
    "AnthropicPromptCache",
    "CacheFamily",
    "CachePrices",
    "CacheReport",
    "CacheSimulator",
    "CacheTokens",
    "CachedRequest",
    "DeepSeekPromptCache",
    "GooglePromptCache",
    "NoPromptCache",
    "OpenAIPromptCache",
    "PromptCache",
    "SentRequest",
    "cache_prices",
    "prompt_cache_for",
    "rewrite_cost",
]
