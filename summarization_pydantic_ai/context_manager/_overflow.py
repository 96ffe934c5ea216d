"""Reactive overflow recovery: when the provider rejects a request as too long, shrink it by a ladder of
increasingly strong steps and retry, each retry strictly smaller than the one before."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, NoReturn, get_args

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models import ModelRequestContext

from .._compaction import CompactionPlan, assemble_merged, latest_user_request_at, plan_compaction
from .._cutoff import inflight_start
from .._events import EventCallback, OverflowRecovered, OverflowRecoveryFailed, OverflowRetry, emit_event
from .._messages import get_message_id, summary_info
from .._sizes import Measure
from .._tokens import TokenCounter, async_count_tokens
from .._working_set import WorkingSetOptions, protected_call_ids
from ..processors._base import RunInfo, measure, request_info
from ..processors._sliding_window import window_marker_for
from ..processors._summary_plan import keep_message_counter, new_problems
from ..store import HistoryStore
from ._compress import NAME, CompressionMixin, link_summary
from ._ladder_steps import (
    clamp_latest_request,
    clamp_oversized_parts,
    clear_old_tool_results,
    truncate_tool_returns,
)
from ._overflow_numbers import ProviderNumbers, overflow_target, parse_overflow
from ._state import OverflowEpisode, RunState

__all__ = ["LADDER", "Ladder", "LadderResult", "OverflowEpisode", "OverflowMixin"]

logger = logging.getLogger("summarization_pydantic_ai")

Step = Literal[
    "clear_tool_results",
    "truncate_tool_returns",
    "clamp_oversized_parts",
    "summarize",
    "slide_window",
    "clamp_latest_request",
]
LADDER: tuple[Step, ...] = get_args(Step)
"""The steps, mildest first; each runs only while the estimate is still above the target."""

_MARKER_TOKENS = 40

Estimate = Callable[[list[ModelMessage]], Awaitable[int]]
Summarize = Callable[[list[ModelMessage], int], Awaitable[list[ModelMessage]]]


@dataclass(frozen=True)
class LadderResult:
    messages: list[ModelMessage]
    tokens: int
    steps: tuple[Step, ...]
    target: int


@dataclass
class Ladder:
    """The steps of one recovery and what they need: our estimate of a request with given messages (instructions
    and tools included), the counter and budget for token keeps, the summarizing step, and the store a window
    marker is recorded in."""

    estimate: Estimate
    token_counter: TokenCounter
    budget: int
    summarize: Summarize | None = None
    store: HistoryStore | None = None
    working_set: WorkingSetOptions | None = None
    """What a slide keeps verbatim after its marker (pins, the todo list, ...), as every compaction does."""
    history_tool: bool = False
    """The agent can read an original back (`read_history`): a clamp's marker shows the call."""
    latest_request_limit: int | None = None
    """The last step clamps the latest user request only when its text alone is larger than this (the window the
    provider said, in our units, or our own budget); `None`: never."""

    async def run(self, messages: list[ModelMessage], tokens: int, target: int) -> LadderResult:
        """Apply the steps in order until the estimate is at most `target`. A step is kept only when it makes the
        history strictly smaller and adds no history problem; the result never grows."""
        current, steps = messages, list[Step]()
        for step in LADDER:
            if tokens <= target:
                break
            candidate, marker = await self._apply(step, current, tokens, target)
            if candidate is current or new_problems(current, candidate):
                continue
            size = await self.estimate(candidate)
            if size >= tokens:
                continue
            if marker is not None and not await self._record(candidate, marker):
                continue
            current, tokens = candidate, size
            steps.append(step)
        return LadderResult(current, tokens, tuple(steps), target)

    async def _apply(
        self, step: Step, messages: list[ModelMessage], tokens: int, target: int
    ) -> tuple[list[ModelMessage], ModelRequest | None]:
        if step == "clear_tool_results":
            return self._protect(messages, await clear_old_tool_results(messages, tokens - target)), None
        if step == "truncate_tool_returns":
            return self._protect(messages, truncate_tool_returns(messages, tokens - target)), None
        if step == "clamp_oversized_parts":
            return clamp_oversized_parts(messages, tokens - target, target, history_tool=self.history_tool), None
        if step == "clamp_latest_request":
            limit = self.latest_request_limit
            if limit is None:
                return messages, None
            return clamp_latest_request(messages, tokens - target, limit, history_tool=self.history_tool), None
        if step == "summarize":
            return (await self.summarize(messages, tokens) if self.summarize else messages), None
        return await self._slide(messages, tokens, target)

    def _protect(self, before: list[ModelMessage], after: list[ModelMessage]) -> list[ModelMessage]:
        """Put back, verbatim, the tool results of the working set (pins, the todo list) that a step edited in
        place. Returns `before` itself when nothing else was edited (the step then did nothing)."""
        protected = protected_call_ids(before, self.working_set) if self.working_set is not None else frozenset[str]()
        if after is before or not protected or len(after) != len(before):
            return after
        result = [
            _restore_parts(old, new, protected)
            if old is not new and isinstance(old, ModelRequest) and isinstance(new, ModelRequest)
            else new
            for old, new in zip(before, after, strict=True)
        ]
        return before if all(a is b for a, b in zip(before, result, strict=True)) else result

    async def _slide(
        self, messages: list[ModelMessage], tokens: int, target: int
    ) -> tuple[list[ModelMessage], ModelRequest | None]:
        """Drop the oldest messages (pair-safe, never the in-flight exchange) behind a window marker."""
        overhead = tokens - await async_count_tokens(self.token_counter, messages)
        # The latest user request survives a slide whatever it costs (the marker carries it when it is dropped):
        # the kept tail gets what is left.
        latest = latest_user_request_at(messages)
        carried = [messages[latest]] if latest is not None and latest < inflight_start(messages) else []
        room = target - overhead - _MARKER_TOKENS - await async_count_tokens(self.token_counter, carried)
        plan = await self._slide_plan(messages, max(room, 0))
        if plan is None:
            return messages, None
        marker, _ = window_marker_for(messages, plan)
        covers = [mid for mid in map(get_message_id, plan.span) if mid]
        info = summary_info(marker)
        assert info is not None
        info.update(covers=covers, replaces_summaries=list(plan.previous_summary_ids))
        if covers:
            info.update(first_id=covers[0], last_id=covers[-1])
        return assemble_merged(messages, plan, marker)

    async def _slide_plan(self, messages: list[ModelMessage], room: int) -> CompactionPlan | None:
        """The slide's plan: the working set keeps its own budget (`working_set_tokens`: pins and the todo list
        outrank old context), the kept tail gets what is left of `room`. Planned once to learn what the working set
        takes, then again for the tail."""
        plan = await self._plan_with(messages, room)
        used = sum(item.tokens for item in plan.preserved) if plan is not None else 0
        if plan is None or not used:
            return plan
        return await self._plan_with(messages, max(room - used, 0)) or plan

    async def _plan_with(self, messages: list[ModelMessage], tail_tokens: int) -> CompactionPlan | None:
        keep = ("tokens", tail_tokens)
        counter = await keep_message_counter(messages, keep, self.token_counter, self.budget)
        return plan_compaction(
            messages, keep, max_tokens=self.budget, message_tokens=counter, working_set=self.working_set
        )

    async def _record(self, result: list[ModelMessage], marker: ModelRequest) -> bool:
        """Record the window marker with the working context around it (as a summary is), before it is used."""
        link_summary(result, marker)
        if self.store is None:
            return True
        try:
            await self.store.append([marker])
        except Exception:
            logger.exception("recording the window marker failed; the window is not slid")
            return False
        return True


def _restore_parts(old: ModelRequest, new: ModelRequest, protected: frozenset[str]) -> ModelRequest:
    """`new` with the protected tool results of `old` put back; `old` itself when that undoes every edit."""
    if len(old.parts) != len(new.parts):
        return new
    parts = [
        o if isinstance(o, ToolReturnPart) and o.tool_call_id in protected else n
        for o, n in zip(old.parts, new.parts, strict=True)
    ]
    if all(p is o for p, o in zip(parts, old.parts, strict=True)):
        return old
    return replace(new, parts=parts)


class OverflowMixin(CompressionMixin):
    """The overflow half of the middleware (the fields it reads are the middleware's)."""

    overflow_recovery: bool
    max_overflow_retries: int
    token_counter: TokenCounter
    event_callback: EventCallback | None

    async def _recover_overflow(
        self,
        ctx: RunContext[Any],
        request_context: ModelRequestContext,
        error: BaseException,
        state: RunState,
        budget: int,
        store: HistoryStore | None,
    ) -> list[ModelMessage]:
        """The history to retry with (strictly smaller than the rejected one), or raise the original error."""
        episode = state.overflow = state.overflow or OverflowEpisode(error)
        numbers = parse_overflow(error)
        previous = episode.retries[-1].tokens_after if episode.retries else None
        if len(episode.retries) >= self.max_overflow_retries:
            n = len(episode.retries)
            reason = f"the provider still rejected the request after {n} smaller retries" if n else "no retry allowed"
            reason += f" (max_overflow_retries={self.max_overflow_retries})"
            await self._overflow_failed(state, reason, error, previous, numbers)
        try:
            retry = await self._shrink(ctx, request_context, budget, store, numbers, previous)
        except Exception as exc:  # a failing counter or store: the run ends with the provider's error, not this
            logger.exception("overflow recovery failed")
            await self._overflow_failed(state, f"recovery failed ({type(exc).__name__}: {exc})", error, None, numbers)
        tokens, result = retry
        if result.tokens >= tokens:
            await self._overflow_failed(state, "nothing left to cut", error, tokens, numbers)
        episode.retries.append(
            OverflowRetry(
                result.steps,
                tokens,
                result.tokens,
                result.target,
                numbers.prompt_tokens,
                numbers.limit,
                numbers.output_tokens,
            )
        )
        return result.messages

    async def _shrink(
        self,
        ctx: RunContext[Any],
        request_context: ModelRequestContext,
        budget: int,
        store: HistoryStore | None,
        numbers: ProviderNumbers,
        previous: int | None,
    ) -> tuple[int, LadderResult]:
        """Our estimate of the rejected request, and what the ladder made of it."""
        info = request_info(request_context)
        run = RunInfo(ctx, info)

        async def estimate(history: list[ModelMessage]) -> int:
            return (await measure(history, self.token_counter, run, budget, None)).tokens

        async def summarize(history: list[ModelMessage], tokens: int) -> list[ModelMessage]:
            return await self._compress(history, Measure(len(history), tokens, budget), budget, None, store, ctx)

        messages = list(ctx.messages)
        tokens = await estimate(messages)
        if previous is not None:  # what was rejected is the previous retry: the next one must be smaller than both
            tokens = min(tokens, previous)
        target = overflow_target(tokens, budget, numbers)
        tool = self.expose_history_tool and store is not None
        limit = target if numbers.limit is not None else budget  # a guessed target is no reason to cut the request
        ladder = Ladder(estimate, self.token_counter, budget, summarize, store, self._working_set_options(budget))
        ladder.history_tool, ladder.latest_request_limit = tool, limit
        return tokens, await ladder.run(messages, tokens, target)

    async def _overflow_succeeded(self, state: RunState | None) -> None:
        """The request succeeded: report a recovery, if one was under way."""
        if state is None or state.overflow is None:
            return
        episode, state.overflow = state.overflow, None
        if episode.retries:
            await emit_event(self.event_callback, OverflowRecovered(NAME, tuple(episode.retries)))

    async def _overflow_failed(
        self, state: RunState, reason: str, error: BaseException, tokens: int | None, numbers: ProviderNumbers
    ) -> NoReturn:
        """Give up: report it, and raise the original error with a note of what was tried."""
        episode = state.overflow or OverflowEpisode(error)
        state.overflow = None
        retries = tuple(episode.retries)
        original = episode.original
        described = f"{type(original).__name__}: {original}"
        event = OverflowRecoveryFailed(NAME, retries, reason, described, tokens, numbers.prompt_tokens, numbers.limit)
        await emit_event(self.event_callback, event)
        original.add_note(_note(reason, retries, error if error is not original else None))
        raise original


def _note(reason: str, retries: tuple[OverflowRetry, ...], last: BaseException | None) -> str:
    lines = [f"{NAME} overflow recovery gave up: {reason}."]
    for n, retry in enumerate(retries, 1):
        steps = ", ".join(retry.steps) or "no step"
        lines.append(
            f"  retry {n}: {steps}: about {retry.tokens_before:,} -> {retry.tokens_after:,} tokens "
            f"(our estimate; target {retry.target_tokens:,})"
        )
    if last is not None:
        lines.append(f"  last rejection: {type(last).__name__}: {last}")
    return "\n".join(lines)
