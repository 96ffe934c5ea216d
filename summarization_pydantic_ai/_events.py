"""Typed events the processors report: what they did, when, and at what cost.

Pass `event_callback=` to any processor; it receives these dataclasses (sync or async callback). A callback that
raises is logged and otherwise ignored: observing a run never aborts it. The overflow-recovery events are
defined in `_overflow_events`, the cost and budget events in `_cost_events`, `CacheCollapse` in `_cache_events`,
the events of the reductions that call no model in `_reduction_events`; all are importable from here like the
others.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ._cache_events import CacheCollapse
from ._cost_events import BudgetExceeded, BudgetWarningIssued, CostRecorded
from ._overflow_events import OverflowRecovered, OverflowRecoveryFailed, OverflowRetry
from ._reduction_events import ContextReduced, PhaseCheckpointed, ToolResultsCleared, ToolResultsCompressed

__all__ = [
    "AgentCompressionCompleted",
    "AgentCompressionFallback",
    "AgentCompressionRequested",
    "BudgetExceeded",
    "BudgetWarningIssued",
    "CacheCollapse",
    "CallbackFailed",
    "ClampedPart",
    "CompactionCompleted",
    "CompactionFailed",
    "CompactionSkipped",
    "CompactionStarted",
    "ContextEvent",
    "ContextReduced",
    "CostRecorded",
    "EventCallback",
    "LimitWarningIssued",
    "OverflowRecovered",
    "OverflowRecoveryFailed",
    "OverflowRetry",
    "PartsClamped",
    "PhaseCheckpointed",
    "PreservedItem",
    "SummarizerFallback",
    "ToolOutputTruncated",
    "ToolResultsCleared",
    "ToolResultsCompressed",
    "UsageUpdated",
    "WindowTrimmed",
    "emit_event",
]

logger = logging.getLogger("summarization_pydantic_ai")


WorkingSetKind: TypeAlias = Literal["latest_request", "pinned", "user_message", "todo", "error", "tool_exchange"]


@dataclass(frozen=True)
class PreservedItem:
    """One entry of the working set a compaction kept verbatim (see "The working set")."""

    kind: WorkingSetKind
    """`latest_request`, `pinned`, `user_message` (`keep_user_messages`), `todo` (the latest todo tool call and its
    result), `error`, `tool_exchange`."""
    message_ids: tuple[str, ...]
    """The stable ids of its messages (messages without an id are not listed)."""
    messages: int
    tokens: int
    moved: bool
    """True: taken out of the replaced span and kept after the summary. False: it was in the kept part already
    (or, in `preserved_dropped`, it was summarized)."""


@dataclass(frozen=True)
class CompactionStarted:
    """A processor decided to summarize `messages[head_end:cutoff]`."""

    processor: str
    messages_before: int
    tokens_before: int
    head_end: int
    cutoff: int
    focus: str | None = None
    prepared_in_background: bool = False
    """The summary was prepared during the run before the trigger fired (`background_start`): no model is called."""


@dataclass(frozen=True)
class CompactionCompleted:
    """A summary replaced a span; the history went from `*_before` to `*_after`."""

    processor: str
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    cutoff: int
    summarized_messages: int
    duration_s: float
    summarizer: str
    model: str | None = None
    fallback_reason: str | None = None
    preserved: tuple[PreservedItem, ...] = ()
    """The working set after the compaction: what was kept verbatim (see "The working set")."""
    preserved_dropped: tuple[PreservedItem, ...] = ()
    """Working-set entries that were summarized: `working_set_tokens` was spent, or a placement rule left no room."""
    prepared_in_background: bool = False
    """The summary was prepared during the run before the trigger fired (`background_start`); `duration_s` is how
    long it took there, not a wait on the request path."""


@dataclass(frozen=True)
class SummarizerFallback:
    """The configured summarizer failed (exception, timeout, empty text); the deterministic one was used."""

    processor: str
    error: str
    model: str | None = None


@dataclass(frozen=True)
class CompactionFailed:
    """A compaction could not be completed; the history was left exactly as it was."""

    processor: str
    error: str
    tokens_before: int
    messages_before: int
    duration_s: float


@dataclass(frozen=True)
class UsageUpdated:
    """The context was measured before a model request."""

    processor: str
    pct: float
    """A fraction: 0.4 means 40% of `max_tokens`."""
    tokens: int
    max_tokens: int
    messages: int


@dataclass(frozen=True)
class ToolOutputTruncated:
    """A tool output above the limit was cut to its head and tail lines."""

    processor: str
    tool_name: str
    tool_call_id: str
    tokens_before: int
    tokens_after: int
    lines_before: int
    lines_kept: int


@dataclass(frozen=True)
class ClampedPart:
    """One part cut to its head and tail (see `ClampOversizedParts`): where it is and its size before and after."""

    message_index: int
    part_index: int
    kind: str
    """`text`, `tool_call_args`, `tool_return`, `user_prompt` or `retry_prompt`."""
    tokens_before: int
    tokens_after: int
    message_id: str | None
    """The stable id of the message: the original is kept under it in the history store (None: not stored)."""


@dataclass(frozen=True)
class PartsClamped:
    """Oversized parts were cut to their head and tail as they entered the history (or by overflow recovery)."""

    processor: str
    parts: tuple[ClampedPart, ...]

    @property
    def tokens_before(self) -> int:
        return sum(p.tokens_before for p in self.parts)

    @property
    def tokens_after(self) -> int:
        return sum(p.tokens_after for p in self.parts)


@dataclass(frozen=True)
class CallbackFailed:
    """A user callback raised; it was logged and the run went on."""

    processor: str
    callback: str
    error: str


@dataclass(frozen=True)
class CompactionSkipped:
    """A trigger fired but nothing could be summarized (the span was empty or only earlier summaries)."""

    processor: str
    reason: str
    tokens: int
    messages: int


@dataclass(frozen=True)
class WindowTrimmed:
    """The sliding window dropped messages."""

    processor: str
    dropped_messages: int
    messages_after: int
    tokens_before: int
    preserved: tuple[PreservedItem, ...] = ()
    """The working set after the trim: what was kept verbatim (see "The working set")."""
    preserved_dropped: tuple[PreservedItem, ...] = ()
    """Working-set entries that were dropped with the rest: the budget was spent, or a placement rule left no room."""


@dataclass(frozen=True)
class LimitWarningIssued:
    """The model was warned that a limit is near."""

    processor: str
    text: str


@dataclass(frozen=True)
class AgentCompressionRequested:
    """The agent was asked to write its memory file and call `compression_complete` (attempt `attempt`)."""

    processor: str
    attempt: int
    tokens: int
    max_tokens: int
    path: str
    previous_failure: str | None = None
    """Why the previous attempt failed (not written, ignored, too long, the run ended), after the first."""


@dataclass(frozen=True)
class AgentCompressionCompleted:
    """The agent wrote its memory; the history was cut to the target and the memory injected."""

    processor: str
    attempt: int
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    memory_tokens: int
    path: str


@dataclass(frozen=True)
class AgentCompressionFallback:
    """Every attempt failed: the history was compacted algorithmically instead (a summary)."""

    processor: str
    attempts: int
    reason: str


ContextEvent: TypeAlias = (
    CompactionStarted
    | CompactionCompleted
    | CompactionFailed
    | UsageUpdated
    | ToolOutputTruncated
    | PartsClamped
    | CallbackFailed
    | SummarizerFallback
    | CompactionSkipped
    | WindowTrimmed
    | ToolResultsCleared
    | ToolResultsCompressed
    | LimitWarningIssued
    | AgentCompressionRequested
    | AgentCompressionCompleted
    | AgentCompressionFallback
    | OverflowRecovered
    | OverflowRecoveryFailed
    | CostRecorded
    | BudgetWarningIssued
    | BudgetExceeded
    | ContextReduced
    | PhaseCheckpointed
    | CacheCollapse
)

EventCallback: TypeAlias = Callable[[ContextEvent], Awaitable[None] | None]


async def emit_event(callback: EventCallback | None, event: ContextEvent) -> None:
    """Deliver `event` to a sync or async callback; a failing callback is logged, never raised."""
    logger.debug("%s", event)
    if callback is None:
        return
    try:
        result = callback(event)
        if inspect.isawaitable(result):
            await result
    except Exception:
        logger.exception("event callback %r failed on %s", callback, type(event).__name__)
