"""What `ContextMetrics` records: one entry per model request, per reduction and per phase checkpoint."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CheckpointRecord", "MetricsSummary", "ReductionRecord", "RequestRecord", "summarize_records"]


@dataclass(frozen=True)
class RequestRecord:
    """One model request: the working context as it reached the context capabilities and as it was sent."""

    run: int
    """1-based index of the run within the session (the `ContextMetrics` instance)."""
    request: int
    """1-based index of the request within its run."""
    tokens_before: int
    """Estimated tokens of the request before this request's reductions (messages, instructions, tools)."""
    tokens_sent: int
    """Estimated tokens of the request the model received."""
    messages_before: int
    messages_sent: int
    input_tokens: int | None = None
    """Input tokens the provider reported for the request (`None` when it reported none)."""
    output_tokens: int | None = None


@dataclass(frozen=True)
class ReductionRecord:
    """The working context shrank: `steps` (the capabilities that acted) took it from `tokens_before` to
    `tokens_after`."""

    strategy: str
    """The strategy label of the `ContextMetrics` (a `ContextConfig` sets its `strategy`), else the steps."""
    steps: tuple[str, ...]
    """The capabilities that reported a reduction (e.g. `MessageCompressor`, `SlidingWindowProcessor`); empty
    when the history shrank without an event (a processor that reports none)."""
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    run: int | None = None
    """The run and request it happened in; `None` for a reduction outside a run (a plain processor call)."""
    request: int | None = None

    @property
    def tokens_saved(self) -> int:
        return max(self.tokens_before - self.tokens_after, 0)

    @property
    def pct_reduced(self) -> float:
        """The reduction in percent of `tokens_before` (42.0 means 42% fewer tokens), as `ContextReduced` has it."""
        return 100.0 * self.tokens_saved / self.tokens_before if self.tokens_before else 0.0


@dataclass(frozen=True)
class CheckpointRecord:
    """Phases were checkpointed (a `PhaseCheckpointed` event)."""

    phases: tuple[str, ...]
    archived_messages: int
    """Messages that left the working context (they stay readable in the history store)."""
    tokens_before: int
    tokens_after: int
    checkpoint_id: str | None = None
    run: int | None = None
    request: int | None = None


@dataclass(frozen=True)
class MetricsSummary:
    """Totals and averages over a session (`ContextMetrics.summary()`) or one run (`summary(run=...)`)."""

    runs: int
    requests: int
    input_tokens: int
    """Input tokens the provider reported, all requests together."""
    output_tokens: int
    tokens_sent: int
    """Estimated tokens sent, all requests together."""
    max_request_tokens: int
    """The largest request sent (estimated): what has to fit the context window."""
    average_request_tokens: float
    reductions: int
    tokens_saved: int
    """Tokens removed by all reductions together (each counted when it happened)."""
    average_reduction_pct: float
    """The mean reduction, in percent of the context it reduced (42.0 means 42%)."""
    checkpoints: int
    steps: tuple[tuple[str, int], ...] = ()
    """How many reductions each capability took part in, most frequent first."""

    def lines(self) -> list[str]:
        """The summary as short lines of text (the CLI's `/context` prints them)."""
        steps = ", ".join(f"{name} x{count}" for name, count in self.steps) or "none"
        return [
            f"Requests    {self.requests} in {self.runs} run(s); largest ~{self.max_request_tokens:,} tokens, "
            f"average ~{self.average_request_tokens:,.0f}",
            f"Usage       {self.input_tokens:,} input / {self.output_tokens:,} output tokens (provider-reported)",
            f"Reductions  {self.reductions}: ~{self.tokens_saved:,} tokens removed, "
            f"{self.average_reduction_pct:.0f}% per reduction on average (by {steps})",
            f"Checkpoints {self.checkpoints}",
        ]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def summarize_records(
    runs: int,
    requests: Sequence[RequestRecord],
    reductions: Sequence[ReductionRecord],
    checkpoints: Sequence[CheckpointRecord],
) -> MetricsSummary:
    sent = [r.tokens_sent for r in requests]
    steps = Counter(step for r in reductions for step in r.steps)
    return MetricsSummary(
        runs=runs,
        requests=len(requests),
        input_tokens=sum(r.input_tokens or 0 for r in requests),
        output_tokens=sum(r.output_tokens or 0 for r in requests),
        tokens_sent=sum(sent),
        max_request_tokens=max(sent, default=0),
        average_request_tokens=sum(sent) / len(sent) if sent else 0.0,
        reductions=len(reductions),
        tokens_saved=sum(r.tokens_saved for r in reductions),
        average_reduction_pct=sum(r.pct_reduced for r in reductions) / len(reductions) if reductions else 0.0,
        checkpoints=len(checkpoints),
        steps=tuple(steps.most_common()),
    )
