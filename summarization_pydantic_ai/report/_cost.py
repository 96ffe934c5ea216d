"""The report's cost figures: the cost module's ledger fed the records in order, a cumulative figure per request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import ModelMessage, ModelResponse

from ..cost import CacheStamp, CostLedger, CostTotals, Spend

__all__ = ["CostView", "cost_view"]


@dataclass(frozen=True)
class CostView:
    """What the report says about cost: the session's totals, and a cumulative figure per request."""

    cumulative: Sequence[float | None]
    """USD after each request; a lower bound once a request is unpriced; `None` while no request is priced."""
    totals: CostTotals
    cache_requests: tuple[tuple[int, CacheStamp], ...] = ()
    """The requests billed through the prompt cache (number, figures), in order."""


def cost_view(messages: Sequence[ModelMessage]) -> CostView:
    """Totals as `session_costs` gives them, and the running total after each request (a summarizer's calls count
    at the request whose compaction made them). After an unpriced request the line is a lower bound: the priced
    requests alone (the totals say unknown, never 0)."""
    ledger = CostLedger()
    running = Spend()
    cumulative: list[float | None] = []
    stamps: list[tuple[int, CacheStamp]] = []
    for message in messages:
        for priced in ledger.add_messages([message]):
            running = running + priced.spend
        if isinstance(message, ModelResponse):
            if (stamp := CacheStamp.parse(message.metadata)) is not None:
                stamps.append((len(cumulative) + 1, stamp))
            known = running.cost_usd if running.cost_usd is not None else running.known_cost_usd
            cumulative.append(float(known) if running.requests > running.unpriced_requests else None)
    return CostView(cumulative, ledger.totals(), tuple(stamps))
