"""`ContextMetrics`: what the context capabilities did, per run and per session, as records, totals and spans."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, cast

from opentelemetry import trace
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult

from .._events import ContextEvent
from .._tokens import TokenCounter, async_count_tokens, count_tokens_approximately
from ..processors._base import check_counter, request_overhead_tokens
from ._records import (
    CheckpointRecord,
    MetricsSummary,
    ReductionRecord,
    RequestRecord,
    summarize_records,
)

__all__ = ["ContextMetrics"]

# Events that mean "the working context shrank"; their `processor` names the step. By name, so that events of
# capabilities this module does not import (or that a user defines) count alike.
_REDUCING = frozenset(
    {
        "AgentCompressionCompleted",
        "CompactionCompleted",
        "ContextReduced",
        "OverflowRecovered",
        "PartsClamped",
        "ToolOutputTruncated",
        "ToolResultsCleared",
        "ToolResultsCompressed",
        "WindowTrimmed",
    }
)
_CHECKPOINT = "PhaseCheckpointed"


@dataclass(eq=False)
class _RunState:
    index: int
    session: _Session
    requests: int = 0
    tokens_before: int = 0
    messages_before: int = 0
    overhead: int = 0
    steps: list[str] = field(default_factory=list[str])


_current_run: ContextVar[_RunState | None] = ContextVar("summarization_pydantic_ai_metrics_run", default=None)


@dataclass(eq=False)
class _Session:
    runs: int = 0
    requests: list[RequestRecord] = field(default_factory=list[RequestRecord])
    reductions: list[ReductionRecord] = field(default_factory=list[ReductionRecord])
    checkpoints: list[CheckpointRecord] = field(default_factory=list[CheckpointRecord])
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class ContextMetrics(AbstractCapability[Any]):
    """Measure every model request of every run, and record each reduction and phase checkpoint.

    Put it first in the capability list (outermost): its `before_model_request` sees the history as the run
    hands it over, and its `after_model_request` sees what the model was sent, after every other capability
    (processors, `ContextManagerMiddleware`) had its turn. A request that went out smaller than it came in is a
    reduction; the capabilities that reported one in between (through `record`, passed as their
    `event_callback`) are named as its steps. `PhaseCheckpointed` events become checkpoint records.

    One instance is one session: `summary()` covers all its runs, `summary(run=-1)` the latest. Each request also
    sets span attributes (`context.tokens_before`, `context.tokens_sent`, `context.reduction_pct`, ...) on the
    current OpenTelemetry span, and each run its totals (`context.run.*`), when instrumentation is on.
    `ContextConfig` builds and wires one for you.

    Example:
        ```python
        metrics = ContextMetrics()
        window = SlidingWindowProcessor(trigger=('messages', 50), keep=20, event_callback=metrics.record)
        agent = Agent('openai:gpt-4.1', capabilities=[metrics, window])
        ...
        print(metrics.summary())
        ```
    """

    strategy: str | None = None
    """A label for the reductions (`ContextConfig` sets its strategy); default: the steps that acted."""
    token_counter: TokenCounter = count_tokens_approximately
    """Estimates the messages of a request (instructions and tool definitions are added)."""
    _session: _Session = field(default_factory=_Session, repr=False, compare=False)
    _run: _RunState | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_counter(self.token_counter)

    # -- reading -------------------------------------------------------------------------------------------------

    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        with self._session.lock:
            return tuple(self._session.requests)

    @property
    def reductions(self) -> tuple[ReductionRecord, ...]:
        with self._session.lock:
            return tuple(self._session.reductions)

    @property
    def checkpoints(self) -> tuple[CheckpointRecord, ...]:
        with self._session.lock:
            return tuple(self._session.checkpoints)

    @property
    def runs(self) -> int:
        """Runs started with this instance."""
        return self._session.runs

    def summary(self, run: int | None = None) -> MetricsSummary:
        """Totals and averages of the session, or of one run: its 1-based index, or -1 for the latest.

        Raises:
            ValueError: no such run."""
        session = self._session
        with session.lock:
            requests, reductions, checkpoints = list(session.requests), session.reductions, session.checkpoints
            runs = session.runs
            if run is None:
                return summarize_records(runs, requests, list(reductions), list(checkpoints))
            index = runs + 1 + run if run < 0 else run
            if not 1 <= index <= runs:
                raise ValueError(f"no run {run} in this session: {runs} run(s) so far (use 1..{runs} or -1)")
            return summarize_records(
                1,
                [r for r in requests if r.run == index],
                [r for r in reductions if r.run == index],
                [c for c in checkpoints if c.run == index],
            )

    def reset(self) -> None:
        """Forget everything recorded (a new session)."""
        with self._session.lock:
            fresh = _Session()
            self._session.runs, self._session.requests = 0, fresh.requests
            self._session.reductions, self._session.checkpoints = fresh.reductions, fresh.checkpoints

    # -- the event callback --------------------------------------------------------------------------------------

    def record(self, event: ContextEvent | Any) -> None:
        """An `event_callback` for the context capabilities: reductions name their step, phase checkpoints are
        recorded. Outside a run, an event that carries its own sizes (a compaction, a `ContextReduced`) becomes a
        reduction record by itself. Other events are ignored."""
        kind = type(event).__name__
        state = _current_run.get()
        if kind == _CHECKPOINT:
            self._add_checkpoint(event, state)
        elif kind in _REDUCING:
            if state is not None and state.session is self._session:
                state.steps.append(str(getattr(event, "processor", kind)))
            else:
                self._add_plain_reduction(event, kind)

    def _add_checkpoint(self, event: Any, state: _RunState | None) -> None:
        if state is not None and state.session is not self._session:
            state = None  # another instance's run
        phases: Any = getattr(event, "phases", ())
        record = CheckpointRecord(
            phases=tuple(map(str, cast(Sequence[Any], phases))) if isinstance(phases, tuple | list) else (str(phases),),
            archived_messages=_int_or_none(getattr(event, "archived_messages", None)) or 0,
            tokens_before=_int_or_none(getattr(event, "tokens_before", None)) or 0,
            tokens_after=_int_or_none(getattr(event, "tokens_after", None)) or 0,
            checkpoint_id=getattr(event, "checkpoint_id", None),
            run=state.index if state else None,
            request=state.requests if state else None,
        )
        with self._session.lock:
            self._session.checkpoints.append(record)

    def _add_plain_reduction(self, event: Any, kind: str) -> None:
        before = _int_or_none(getattr(event, "tokens_before", None))
        after = _int_or_none(getattr(event, "tokens_after", None))
        if before is None or after is None or after >= before:
            return
        step = str(getattr(event, "processor", kind))
        messages_before = _int_or_none(getattr(event, "messages_before", None)) or 0
        messages_after = _int_or_none(getattr(event, "messages_after", None)) or 0
        record = ReductionRecord(self.strategy or step, (step,), before, after, messages_before, messages_after)
        with self._session.lock:
            self._session.reductions.append(record)

    # -- capability hooks ----------------------------------------------------------------------------------------

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        with self._session.lock:
            self._session.runs += 1
            index = self._session.runs
        clone = replace(self)
        clone._run = _RunState(index, self._session)
        return clone

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        state = self._run
        if state is None:
            return request_context
        state.requests += 1
        state.steps = []
        state.overhead = request_overhead_tokens(request_context)
        messages = request_context.messages
        state.tokens_before = await self._count(messages) + state.overhead
        state.messages_before = len(messages)
        _current_run.set(state)  # later capabilities' events (same task) are attributed to this request
        return request_context

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        state = self._run
        if state is None or state.requests == 0:
            return response
        messages = request_context.messages
        sent = await self._count(messages) + state.overhead
        usage = response.usage
        request = RequestRecord(
            state.index,
            state.requests,
            state.tokens_before,
            sent,
            state.messages_before,
            len(messages),
            usage.input_tokens if usage.input_tokens else None,
            usage.output_tokens if usage.output_tokens else None,
        )
        reduction = self._reduction(state, request)
        with self._session.lock:
            self._session.requests.append(request)
            if reduction is not None:
                self._session.reductions.append(reduction)
        _set_request_span(request, reduction, self.strategy)
        return response

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        if self._run is not None and self._run.requests:
            _set_run_span(self.summary(run=self._run.index), self._run.index, self.strategy)
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    # -- internals -----------------------------------------------------------------------------------------------

    async def _count(self, messages: Sequence[ModelMessage]) -> int:
        return await async_count_tokens(self.token_counter, messages)

    def _reduction(self, state: _RunState, request: RequestRecord) -> ReductionRecord | None:
        if request.tokens_sent >= request.tokens_before:
            return None
        steps = tuple(dict.fromkeys(state.steps))
        return ReductionRecord(
            self.strategy or "+".join(steps) or "unreported",
            steps,
            request.tokens_before,
            request.tokens_sent,
            request.messages_before,
            request.messages_sent,
            request.run,
            request.request,
        )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _set_request_span(request: RequestRecord, reduction: ReductionRecord | None, strategy: str | None) -> None:
    span = trace.get_current_span()
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {
        "context.tokens_before": request.tokens_before,
        "context.tokens_sent": request.tokens_sent,
        "context.messages_before": request.messages_before,
        "context.messages_sent": request.messages_sent,
        "context.reduction_pct": round(reduction.pct_reduced, 2) if reduction else 0.0,
    }
    if reduction is not None:
        attributes["context.reduction_steps"] = list(reduction.steps)
    if strategy:
        attributes["context.strategy"] = strategy
    span.set_attributes(attributes)


def _set_run_span(summary: MetricsSummary, run: int, strategy: str | None) -> None:
    span = trace.get_current_span()
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {
        "context.run.index": run,
        "context.run.requests": summary.requests,
        "context.run.max_request_tokens": summary.max_request_tokens,
        "context.run.tokens_sent": summary.tokens_sent,
        "context.run.reductions": summary.reductions,
        "context.run.tokens_saved": summary.tokens_saved,
        "context.run.average_reduction_pct": round(summary.average_reduction_pct, 2),
        "context.run.checkpoints": summary.checkpoints,
    }
    if strategy:
        attributes["context.strategy"] = strategy
    span.set_attributes(attributes)
