"""The events of the reductions that call no model: old tool results cleared (`ToolResultsCleared`) or compressed in
place (`ToolResultsCompressed`), messages taken out by a zero-LLM strategy (`ContextReduced`), phases checkpointed
(`PhaseCheckpointed`). Part of `ContextEvent` and importable from `_events` like the others."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ContextReduced", "PhaseCheckpointed", "ToolResultsCleared", "ToolResultsCompressed"]


@dataclass(frozen=True)
class ToolResultsCleared:
    """Old tool results were replaced by placeholders."""

    processor: str
    cleared: int
    tokens_reclaimed: int
    tool_call_ids: tuple[str, ...]


@dataclass(frozen=True)
class ToolResultsCompressed:
    """Old tool results were compressed in place (`MessageCompressor`): how many, and their size in characters
    before and after."""

    processor: str
    compressed: int
    chars_before: int
    chars_after: int
    tool_call_ids: tuple[str, ...]

    @property
    def reduction(self) -> float:
        """The share of the characters removed (0.0 to 1.0)."""
        return 1 - self.chars_after / self.chars_before if self.chars_before else 0.0


@dataclass(frozen=True)
class ContextReduced:
    """A zero-LLM strategy made the working context smaller (importance pruning, a phase checkpoint, ...)."""

    processor: str
    strategy: str
    """What reduced it: `'importance'` (`ImportancePruner`), `'checkpoint'` (`PhaseCheckpoints`), ..."""
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    removed_message_ids: tuple[str, ...] = ()
    """The stable ids of the messages taken out of the working context (messages without an id are not listed)."""

    @property
    def tokens_saved(self) -> int:
        return max(self.tokens_before - self.tokens_after, 0)

    @property
    def pct_reduced(self) -> float:
        """The reduction in percent of `tokens_before` (42.0 means 42% fewer tokens); 0.0 for an empty context."""
        return 100.0 * self.tokens_saved / self.tokens_before if self.tokens_before else 0.0


@dataclass(frozen=True)
class PhaseCheckpointed:
    """Phases were marked done: the context was rebuilt as the original instructions plus one checkpoint message,
    and the messages of the completed phases were archived (in the history store, when there is one)."""

    processor: str
    phases: tuple[str, ...]
    """The phases this checkpoint completed (in the order they were marked done)."""
    objectives: tuple[str, ...]
    archived_messages: int
    """How many messages left the working context (they stay readable in the store)."""
    tokens_before: int
    tokens_after: int
    checkpoint_id: str | None = None
    """The stable id of the checkpoint message."""
    first_archived_id: str | None = None
    last_archived_id: str | None = None
