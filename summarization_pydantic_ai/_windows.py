"""Context windows from genai-prices, exactly as the package reports them."""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

__all__ = ["DEFAULT_MAX_TOKENS", "is_offline_model", "resolve_max_tokens"]

logger = logging.getLogger("summarization_pydantic_ai")

DEFAULT_MAX_TOKENS = 200_000
"""What the middleware assumes when a model's window is unknown (always reported, never silent)."""

# pydantic-ai provider prefixes whose genai-prices provider id differs.
PROVIDER_ALIASES = {
    "google-gla": "google",
    "google-vertex": "google",
    "google-cloud": "google",
    "gemini": "google",
    "vertexai": "google",
    "bedrock": "aws",
    "grok": "x-ai",
    "xai": "x-ai",
    "moonshot": "moonshotai",
    "openai-chat": "openai",
    "openai-responses": "openai",
}

_warned: set[str] = set()
_warned_lock = threading.Lock()


def _model_name(model_or_name: Any) -> str:
    if isinstance(model_or_name, str):
        return model_or_name
    system = getattr(model_or_name, "system", None)
    name = getattr(model_or_name, "model_name", None)
    if isinstance(name, str):
        prefixed = isinstance(system, str) and system and not name.startswith(f"{system}:")
        return f"{system}:{name}" if prefixed else name
    raise TypeError(f"expected a model name like 'openai:gpt-4.1' or a pydantic-ai Model, got {model_or_name!r}")


@functools.lru_cache(maxsize=1024)
def _lookup(name: str) -> int | None:
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    provider, sep, model_ref = name.partition(":")
    if not sep:
        provider, model_ref = "", name
    provider_id = PROVIDER_ALIASES.get(provider, provider) or None
    for candidate in (provider_id, None) if provider_id else (None,):
        try:
            _, model = snapshot.find_provider_model(model_ref, None, candidate, None)
        except LookupError:
            continue
        return model.context_window
    return None


_OFFLINE_SYSTEMS = ("test", "function")
"""pydantic-ai's `TestModel` and `FunctionModel`: scripted stand-ins with no window of their own, never looked up."""


def is_offline_model(model_or_name: Any) -> bool:
    """Whether this is a scripted stand-in (`TestModel`, `FunctionModel`) rather than a real model."""
    try:
        name = _model_name(model_or_name)
    except TypeError:
        return False
    return name.partition(":")[0] in _OFFLINE_SYSTEMS


def resolve_max_tokens(model_or_name: Any) -> int | None:
    """The context window of a model, as genai-prices reports it; `None` when unknown.

    Accepts `'provider:model'` (`'openai:gpt-4.1'`, `'anthropic:claude-sonnet-4-5'`), a bare model name, or a
    pydantic-ai `Model`. Results are cached. An unknown model (or one genai-prices lists without a window) returns
    `None` and logs one warning per name (none for the scripted `TestModel` and `FunctionModel`, which have no
    window); callers decide the fallback. No output reserve is subtracted here: the
    processors apply `reserve_output_tokens` where they compute their budget.

    Example:
        ```python
        resolve_max_tokens('openai:gpt-4o')  # 128000
        ```
    """
    name = _model_name(model_or_name)
    if name.partition(":")[0] in _OFFLINE_SYSTEMS:
        return None
    window = _lookup(name)
    if window is None:
        with _warned_lock:
            first = name not in _warned
            _warned.add(name)
        if first:
            logger.warning("context window of %r is unknown to genai-prices; set max_tokens explicitly", name)
    return window
