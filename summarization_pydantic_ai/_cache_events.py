"""`CacheCollapse`: a request read back far less of the provider's prompt cache than the prefix established
before it (see Prompt caching and cost).

Part of `ContextEvent` and exported with the other events. The thresholds and the reasons are pydantic-ai's own
(`pydantic_ai._cache_health`: a shortfall of at least 2,000 tokens and more than 5% of the established prefix;
`'compacted'`, `'ttl_expired'`, `'unexpected'`, `'unknown'`, `'unreported'`), imported from it, so this event
and pydantic-ai's instrumentation call the same requests collapses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["MIN_MISSED_RATIO", "MIN_MISSED_TOKENS", "CacheCollapse", "CollapseReason", "is_collapse"]

# pydantic-ai's own thresholds (0.05 and 2,000 as of 2.68), so both call the same requests collapses.
from pydantic_ai._cache_health import MIN_MISSED_RATIO, MIN_MISSED_TOKENS  # pyright: ignore[reportPrivateUsage]

CollapseReason: TypeAlias = Literal["compacted", "ttl_expired", "unexpected", "unknown", "unreported"]


@dataclass(frozen=True)
class CacheCollapse:
    """A request read back far less of the cached prefix than the requests before it had established.

    `reason` says why, as far as can be told: `'compacted'` (the history before it was rewritten: a reduction),
    `'ttl_expired'` (idle longer than the cache's retention), `'unknown'` (no retention is known), `'unreported'`
    (the provider reported no cache use at all), `'unexpected'` (none of these: the prefix moved).
    """

    processor: str
    reason: CollapseReason
    established_tokens: int
    """The cached prefix the earlier requests established."""
    cache_read_tokens: int
    missed_tokens: int
    """Established tokens not read back (paid again at the write or input price)."""
    source: Literal["reported", "estimated"]
    """The provider's usage, or the simulator's estimate when the provider reported none."""
    model: str
    changed_at: int | None = None
    """The index of the first message the history changed at, for `'compacted'`."""
    idle_seconds: float | None = None
    retention_seconds: float | None = None


def is_collapse(established: int, read: int) -> bool:
    """pydantic-ai's rule: the shortfall is at least `MIN_MISSED_TOKENS` and more than `MIN_MISSED_RATIO` of the
    established prefix."""
    missed = established - read
    return missed >= MIN_MISSED_TOKENS and missed > established * MIN_MISSED_RATIO
