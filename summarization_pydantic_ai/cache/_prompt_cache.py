"""The prompt-cache model every provider family refines: a request as positions (`Layout`), the base `PromptCache`
(where entries are written and read, how long they live, what a hit bills) and `NoPromptCache`.

A request is laid out in positions: 0 the tool definitions, 1 the instructions, 2 on one per message. A cache
entry is the prefix up to a position; a request reads the longest live entry it finds (where the family looks)
and the simulator (`CacheSimulator`) bills the rest as written or uncached. The families are in `_providers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar, Literal, TypeAlias

__all__ = [
    "FIRST_MESSAGE",
    "INSTRUCTIONS",
    "TOOLS",
    "TTLS",
    "CacheFamily",
    "Layout",
    "NoPromptCache",
    "PromptCache",
    "Ttl",
]


CacheFamily: TypeAlias = Literal["anthropic", "openai", "google", "deepseek", "none"]
Ttl: TypeAlias = Literal["5m", "1h"]

TOOLS, INSTRUCTIONS, FIRST_MESSAGE = 0, 1, 2
"""The positions of a request: tool definitions, instructions, then one per message."""

TTLS: dict[str, timedelta] = {"5m": timedelta(minutes=5), "1h": timedelta(hours=1)}


@dataclass(frozen=True)
class Layout:
    """One request as positions: `cum_tokens[p]` tokens up to and including position `p`, `cum_blocks[p]`
    content blocks up to it, and the positions whose message carries a `CachePoint` (with its TTL)."""

    cum_tokens: list[int]
    cum_blocks: list[int]
    cache_points: Mapping[int, Ttl] = field(default_factory=dict[int, "Ttl"])

    @property
    def last(self) -> int:
        return len(self.cum_tokens) - 1

    @property
    def total(self) -> int:
        return self.cum_tokens[-1] if self.cum_tokens else 0


@dataclass(frozen=True)
class PromptCache:
    """A provider family's prompt cache (the base: subclasses set the family's rules).

    `write_points` says where a request leaves cache entries (and with which TTL), `read_points` where the
    provider looks for an earlier entry (walking back at most `lookback_blocks` content blocks from each), and
    `readable` how many tokens of a hit are billed as read.

    The base itself caches every prefix with no minimum: `PromptCache(write_premium=True)` is the plain
    message-prefix model (the longest identical prefix of an earlier live request is read, the rest written at
    the write price), a bound that no provider's breakpoints beat.

    Example:
        ```python
        ideal = PromptCache(retention=timedelta(minutes=5), write_premium=True)
        ```
    """

    family: ClassVar[CacheFamily] = "none"
    retention: timedelta | None = None
    """How long an entry lives after its last use; `None`: as long as the session (the provider publishes none)."""
    min_cacheable_tokens: int = 0
    """A prefix shorter than this is never cached."""
    write_premium: bool = False
    """Whether tokens written to the cache are billed at a write price (Anthropic) or as plain input."""
    lookback_blocks: int | None = None
    """How many content blocks back from a read point the provider looks for an entry (`None`: all the way)."""
    persists_common_prefix: ClassVar[bool] = False
    """A prefix two requests share is kept as an entry of its own once seen (DeepSeek)."""
    persists_response_end: ClassVar[bool] = False
    """The end of a request's output is an entry too (DeepSeek): the next request, which repeats it, reads it."""

    def write_points(self, layout: Layout) -> list[tuple[int, Ttl | None]]:
        """The positions a request leaves entries at, ascending, with their TTL (`None`: `retention`)."""
        return [(p, None) for p in range(layout.last + 1)]

    def read_points(self, layout: Layout) -> list[int]:
        """The positions the provider looks back from for an entry (the longest entry found is read)."""
        return [layout.last] if layout.cum_tokens else []

    def readable(self, prefix_tokens: int) -> int:
        """Tokens billed as read when an entry of `prefix_tokens` is hit."""
        return prefix_tokens if prefix_tokens >= self.min_cacheable_tokens else 0

    def ttl(self, label: Ttl | None) -> timedelta | None:
        return TTLS[label] if label is not None else self.retention

    @property
    def enabled(self) -> bool:
        return True


@dataclass(frozen=True)
class NoPromptCache(PromptCache):
    """A model with no prompt cache (or one this package does not model): every input token is uncached."""

    def write_points(self, layout: Layout) -> list[tuple[int, Ttl | None]]:
        return []

    def read_points(self, layout: Layout) -> list[int]:
        return []

    @property
    def enabled(self) -> bool:
        return False
