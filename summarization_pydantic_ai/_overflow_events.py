"""The events of overflow recovery: one per retry of a request the provider rejected as too long, and how the
recovery ended (see Overflow recovery).

They are part of `ContextEvent` and exported with the other events; they live apart because they share the
`_OverflowReport` view of the retries (the steps that ran, our estimates) that no other event needs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OverflowRecovered", "OverflowRecoveryFailed", "OverflowRetry"]


@dataclass(frozen=True)
class OverflowRetry:
    """One retry of a request the provider rejected as too long (see Overflow recovery)."""

    steps: tuple[str, ...]
    """The ladder steps that shrank the history, in order: `'clear_tool_results'`, `'truncate_tool_returns'`,
    `'summarize'`, `'slide_window'`."""
    tokens_before: int
    """Our estimate of the rejected request (messages, instructions and tools)."""
    tokens_after: int
    """Our estimate of the retried request: always below `tokens_before`."""
    target_tokens: int
    """What the ladder aimed for (our estimate, with the safety margin); the retry is sent even when the
    strongest step could not reach it, as long as it is smaller."""
    provider_tokens: int | None = None
    """The size of the rejected prompt as the provider counted it, when its error said."""
    provider_limit: int | None = None
    """The provider's context window, when its error said."""
    provider_output_tokens: int | None = None
    """The output tokens the provider counted against the window (`max_tokens`), when its error said."""


class _OverflowReport:
    retries: tuple[OverflowRetry, ...]

    @property
    def steps(self) -> tuple[str, ...]:
        """Every ladder step that ran, over all retries, in order."""
        return tuple(step for retry in self.retries for step in retry.steps)

    @property
    def estimates(self) -> tuple[int, ...]:
        """Our estimate of the first rejected request, then of each retry: strictly decreasing."""
        if not self.retries:
            return ()
        return (self.retries[0].tokens_before, *(retry.tokens_after for retry in self.retries))


@dataclass(frozen=True)
class OverflowRecovered(_OverflowReport):
    """A request the provider rejected as too long succeeded after `len(retries)` smaller retries."""

    processor: str
    retries: tuple[OverflowRetry, ...]


@dataclass(frozen=True)
class OverflowRecoveryFailed(_OverflowReport):
    """Overflow recovery gave up: the original error is raised, with a note of what was tried."""

    processor: str
    retries: tuple[OverflowRetry, ...]
    """The retries made before giving up (possibly none)."""
    reason: str
    error: str
    """The original error, as text."""
    tokens: int | None = None
    """Our estimate of the last rejected request."""
    provider_tokens: int | None = None
    provider_limit: int | None = None
