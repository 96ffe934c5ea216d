"""Prices from genai-prices (`calc_price`), and the one warning for a model it does not know."""

from __future__ import annotations

import logging
import threading
from dataclasses import fields
from decimal import Decimal

from genai_prices import calc_price
from pydantic_ai.usage import RequestUsage

from .._windows import PROVIDER_ALIASES, is_offline_model

__all__ = ["model_label", "price_usage"]

logger = logging.getLogger("summarization_pydantic_ai")

_warned: set[str] = set()
_warned_lock = threading.Lock()


def model_label(model: str | None, provider: str | None) -> str:
    """`provider:model` as a user reads it (`'openai:gpt-4o'`), or the bare name."""
    if not model:
        return "unknown model"
    return f"{provider}:{model}" if provider and not model.startswith(f"{provider}:") else model


def price_usage(usage: RequestUsage, model: str | None, provider: str | None, *, warn: bool = True) -> Decimal | None:
    """The price of one call in USD, as genai-prices computes it; `None` (never 0) for a model it does not know,
    with one warning per model name."""
    if model and provider is None and ":" in model:
        provider, _, model = model.partition(":")  # `price_as='openai:gpt-4.1'`: the provider, then the model
    key = _key(usage, model, provider)
    if key in _recent:
        price = _recent[key]
    else:
        price = _price(usage, model, provider)
        if len(_recent) >= _RECENT_MAX:
            _recent.clear()  # atomic (worker threads price too); refilled by the next calls
        _recent[key] = price
    if price is None and warn:
        _warn_unknown(model_label(model, provider))
    return price


_recent: dict[tuple[object, ...], Decimal | None] = {}
"""Prices computed lately, by model and usage: one response is priced by the run's ledger, the session's, and the
session catalogue its store keeps (genai-prices takes ~0.1 ms a call)."""
_RECENT_MAX = 1024


_USAGE_FIELDS = tuple(f.name for f in fields(RequestUsage) if f.name != "details")


def _key(usage: RequestUsage, model: str | None, provider: str | None) -> tuple[object, ...]:
    counts = tuple(getattr(usage, name) for name in _USAGE_FIELDS)
    return (model, provider, counts, tuple(sorted(usage.details.items())))


def _price(usage: RequestUsage, model: str | None, provider: str | None) -> Decimal | None:
    if model:
        provider_id = PROVIDER_ALIASES.get(provider, provider) if provider else None
        for candidate in (provider_id, None) if provider_id else (None,):
            try:
                return calc_price(usage, model, provider_id=candidate).total_price
            except LookupError:
                continue
    return None


def _warn_unknown(label: str) -> None:
    if is_offline_model(label):
        return  # pydantic-ai's scripted TestModel / FunctionModel: no price to look for
    with _warned_lock:
        first = label not in _warned
        _warned.add(label)
    if first:
        logger.warning("%s is unknown to genai-prices: its tokens are counted, its cost is reported as unknown", label)
