"""The default stack sized to the model's context window: the output eviction starts at, what one step may bring,
and the default context manager's cost policy.

Eviction's fixed 20,000 tokens suit a 200,000-token window; against 32,000 it lets two parallel test logs of
10,000 and 14,000 tokens stay in the request together, and the request pass the window. When the window is known
when the agent is built, an output above a tenth of it is evicted (at most 20,000 tokens, as before), and the
outputs answering one step may take a quarter of it together (the largest go first).
"""

from __future__ import annotations

from typing import Any

from summarization_pydantic_ai import CachePolicy, ContextManagerMiddleware, resolve_max_tokens
from summarization_pydantic_ai.strategies import ContextConfig

from .eviction import EvictionProcessor

__all__ = ["EVICTION_FRACTION", "STEP_FRACTION", "context_window", "default_cache_policy", "default_eviction"]

EVICTION_FRACTION = 0.1
"""An output above this fraction of the window is evicted (never above `EvictionProcessor.token_limit`'s default)."""
STEP_FRACTION = 0.25
"""The outputs answering one model response may take this fraction of the window together."""


def context_window(
    model: Any, max_tokens: int | None, context: ContextConfig | None, context_manager: Any
) -> int | None:
    """The window the stack works against, when known now: `max_tokens`, the strategy's, the given context
    manager's, else the model's (genai-prices). Two different figures are refused."""
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1_000:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"max_tokens must be an int >= 1000 (the model's context window), got {max_tokens!r}")
        if context is not None and context.max_tokens not in (None, max_tokens):
            raise ValueError("max_tokens differs from context.max_tokens: give the window once, on the ContextConfig")
        if isinstance(context_manager, ContextManagerMiddleware) and context_manager.max_tokens != max_tokens:
            raise ValueError(
                "max_tokens sizes the default context manager: set max_tokens on the ContextManagerMiddleware "
                "you pass instead (eviction follows its window)"
            )
    if context is not None and max_tokens is not None and context.max_tokens is None:
        raise ValueError("with context=, give the window on the ContextConfig: ContextConfig(..., max_tokens=...)")
    if max_tokens is not None:
        return max_tokens
    if context is not None:
        return context.window(model)
    if isinstance(context_manager, ContextManagerMiddleware) and context_manager.max_tokens is not None:
        return context_manager.max_tokens
    return None if model is None else resolve_max_tokens(model)


def default_eviction(window: int | None) -> EvictionProcessor:
    """`EvictionProcessor()` sized to `window` (its own defaults when the window is unknown)."""
    if window is None:
        return EvictionProcessor()
    limit = min(EvictionProcessor.token_limit, max(int(EVICTION_FRACTION * window), 1))
    return EvictionProcessor(token_limit=limit, step_token_limit=max(int(STEP_FRACTION * window), limit))


def default_cache_policy(model: Any) -> CachePolicy:
    """The default context manager's policy: the model's cache prices when genai-prices has them, Anthropic's
    otherwise. It keeps nothing but the working set after a compaction, so there is nothing further back for
    thinning to reach: outputs are left as they are (a thinned span only made the summary look longer than it)."""
    return CachePolicy.for_model(model, thin=False) if model is not None else CachePolicy(thin=False)
