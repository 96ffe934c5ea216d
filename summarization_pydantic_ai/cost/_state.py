"""The cost middleware's bookkeeping: per run (two ledgers: the run's and the session's) and across runs."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest
from pydantic_ai.usage import RequestUsage

from .._cursor import HistoryCursor
from ..cache import CachedRequest
from ._cache_tracking import CacheTracks
from ._ledger import CostLedger
from ._seeds import SessionSeeds
from ._spend import CostTotals

__all__ = ["RunCost", "SharedCost", "summaries_in"]


@dataclass
class RunCost:
    """One run: its own ledger, the session's ledger (seeded from the store at the run's first request), the
    previous request's usage with our count of its context (for the estimate of the next), the warnings given."""

    run: CostLedger = field(default_factory=CostLedger)
    session: CostLedger = field(default_factory=CostLedger)
    started: bool = False
    requests: int = 0
    counted: int = 0
    """Our count of the context of the request being sent."""
    last: tuple[RequestUsage, int] | None = None
    retrying: bool = False
    """The provider rejected the request as too long: the next response answers an overflow retry."""
    warned: set[str] = field(default_factory=set[str])
    cursor: HistoryCursor = field(default_factory=lambda: HistoryCursor(fingerprint_all=False))
    """Where the run's history was looked at for new summaries."""
    seed: object = None
    """What the session's ledger was seeded from (`SessionSeeds`), to hand the ledger back at the run's end."""
    produced: list[str] = field(default_factory=list[str])
    """The ids of the requests the run priced as they came (responses, summaries)."""
    given_summaries: list[ModelRequest] = field(default_factory=list[ModelRequest])
    """The summaries in the history the run was given (the session's, not the run's)."""
    cached: CachedRequest | None = None
    """The latest request as the prompt cache billed it (for `CostRecorded`)."""


@dataclass
class SharedCost:
    """What every run of one middleware instance shares: the latest totals (for `/cost`), the priced sessions."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    seeds: SessionSeeds = field(default_factory=SessionSeeds)
    run_totals: CostTotals | None = None
    session_totals: CostTotals | None = None
    caches: CacheTracks = field(default_factory=CacheTracks)
    """The simulated prompt cache of each conversation (it outlives a run: the next run reads what this one
    cached)."""


def summaries_in(messages: list[ModelMessage]) -> list[ModelRequest]:
    """The requests that carry a summary with recorded summarizer calls or sizes (the toolkit's summaries)."""
    found: list[ModelRequest] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, CompactionPart) and part.metadata:
                    found.append(message)
                    break
    return found
