"""Background compaction (`background_start`): the summary of the next compaction, prepared during the run.

Once a request crosses `background_start`, the span that the next compaction would replace is planned exactly as
the synchronous path plans it, and its summary is written in a task of an `anyio` task group that the run owns
(`run_with_background`, entered from the capability's `wrap_run`): the task is cancelled when the run returns,
fails or is cancelled, so it never outlives the run. Nothing is written anywhere while it runs; the preparation
only produces text.

When the trigger fires, `BackgroundCompaction.take` hands the prepared plan and summary over if the messages it
covers are still the history's prefix (the same message objects, unedited), the latest user request is the same,
the summarizer did not fail, its span starts where the synchronous plan's does and ends no later, and its cut still
orphans no result (a late result may have arrived for a call in its span). Otherwise
(stale, unfinished, failed) it is dropped and the caller compacts synchronously. At most one preparation is in
flight per run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from anyio.abc import TaskGroup
from pydantic_ai.messages import ModelMessage

from ._compaction_plan import CompactionPlan
from ._cursor import _fingerprint  # pyright: ignore[reportPrivateUsage]
from ._cutoff import cut_keeps_pairs
from ._sizes import ContextSize, validate_context_size
from ._summary_run import SummaryOutcome

__all__ = [
    "BackgroundCompaction",
    "Prepared",
    "background_tokens",
    "check_background_below",
    "normalize_background_start",
    "run_with_background",
]

logger = logging.getLogger("summarization_pydantic_ai")

_ACCEPTED = "None, a fraction of the window in (0, 1), an int of tokens, ('fraction', f) or ('tokens', n)"


def normalize_background_start(value: Any) -> ContextSize | None:
    """`background_start` as a `ContextSize` in tokens or a fraction, or `None` (off); anything else is refused
    with a `ValueError` that says what is accepted."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"background_start must be {_ACCEPTED}; got {value!r}")
    if isinstance(value, float):
        value = ("fraction", value)
    elif isinstance(value, int):
        value = ("tokens", value)
    try:
        size = validate_context_size(value, name="background_start")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"background_start must be {_ACCEPTED}; got {value!r} ({exc})") from None
    if size[0] == "messages" or (size[0] == "fraction" and size[1] >= 1):
        raise ValueError(f"background_start must be {_ACCEPTED}; got {value!r}")
    return size


def check_background_below(start: ContextSize | None, triggers: Sequence[ContextSize]) -> None:
    """`background_start` must come before the trigger it prepares for (compared where the kinds agree; a
    fraction against tokens is checked at run time, when the window is known)."""
    if start is None:
        return
    for trigger in triggers:
        if trigger[0] == start[0] and start[1] >= trigger[1]:
            raise ValueError(f"background_start {start!r} must be below the trigger {trigger!r}")


def background_tokens(start: ContextSize, budget: int | None) -> int | None:
    """`background_start` in tokens (`None`: a fraction without a known window)."""
    if start[0] == "tokens":
        return int(start[1])
    return None if budget is None else int(start[1] * budget)


@dataclass(frozen=True)
class Prepared:
    """A finished preparation handed to the commit: the plan it summarized and the summarizer's outcome."""

    plan: CompactionPlan
    outcome: SummaryOutcome


@dataclass
class _Preparation:
    prefix: list[ModelMessage]
    """The history's messages up to the plan's cutoff, as they were when the preparation began."""
    fingerprints: list[tuple[object, ...]]
    latest_request: str | None
    plan: CompactionPlan
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    outcome: SummaryOutcome | None = None
    error: str | None = None
    done: bool = False

    def covers_prefix_of(self, messages: Sequence[ModelMessage]) -> bool:
        """The messages it summarized are still the history's first messages: the same objects, not edited."""
        prefix = self.prefix
        if len(messages) < len(prefix):
            return False
        return all(a is b for a, b in zip(prefix, messages, strict=False)) and all(
            _fingerprint(m) == f for m, f in zip(prefix, self.fingerprints, strict=True)
        )


class BackgroundCompaction:
    """The background preparations of one run; lives as long as the run's task group."""

    def __init__(self, task_group: TaskGroup) -> None:
        self._task_group = task_group
        self._preparation: _Preparation | None = None
        self._wasted: list[dict[str, Any]] = []
        self.closed = False

    @property
    def in_flight(self) -> bool:
        return self._preparation is not None and not self._preparation.done

    def wants(self, messages: Sequence[ModelMessage], latest_request: str | None) -> bool:
        """Whether a preparation should start now: none is held, or the one held went stale (a failed one is not
        retried before the next compaction: the synchronous path asks the summarizer then)."""
        held = self._preparation
        if self.closed:
            return False
        if held is None:
            return True
        if held.error is not None or _failed(held.outcome):
            return False
        return not (held.latest_request == latest_request and held.covers_prefix_of(messages))

    def start(
        self,
        messages: Sequence[ModelMessage],
        plan: CompactionPlan,
        latest_request: str | None,
        summarize: Callable[[], Awaitable[SummaryOutcome]],
    ) -> None:
        """Prepare `plan`'s summary with `summarize` in the run's task group (replacing a stale preparation)."""
        self.discard()
        prefix = list(messages[: plan.cutoff])
        preparation = _Preparation(prefix, [_fingerprint(m) for m in prefix], latest_request, plan)
        self._preparation = preparation
        self._task_group.start_soon(_prepare, preparation, summarize)

    def take(
        self, messages: Sequence[ModelMessage], latest_request: str | None, now: CompactionPlan
    ) -> Prepared | None:
        """The finished preparation if it still fits the history and the synchronous plan `now` (its span starts
        where `now`'s does and ends no later); the preparation is given up either way."""
        held, self._preparation = self._preparation, None
        if held is None:
            return None
        if not held.done:
            held.scope.cancel()
            logger.debug("background summary unfinished at the trigger: compacting synchronously")
            return None
        usable = (
            held.outcome is not None
            and not _failed(held.outcome)
            and held.plan.head_end == now.head_end
            and held.plan.cutoff <= now.cutoff
            and held.latest_request == latest_request
            and held.covers_prefix_of(messages)
            and cut_keeps_pairs(messages, held.plan.cutoff)
        )
        if not usable:
            self._waste(held)
            logger.debug("background summary stale or failed at the trigger: compacting synchronously")
            return None
        assert held.outcome is not None
        return Prepared(held.plan, held.outcome)

    def reject(self, prepared: Prepared) -> None:
        """A taken preparation the commit could not use after all: its spend is carried to the next commit."""
        self._wasted.extend(prepared.outcome.usage)

    def discard(self) -> None:
        """Give up the preparation held (cancelled if still running; its spend is carried to the next commit)."""
        held, self._preparation = self._preparation, None
        if held is None:
            return
        if held.done:
            self._waste(held)
        else:
            held.scope.cancel()

    def with_wasted_usage(self, outcome: SummaryOutcome) -> SummaryOutcome:
        """`outcome` with the summarizer calls of discarded preparations added: the commit records them, so the
        cost tracking counts what the background spent (each call once, by its id)."""
        if not self._wasted:
            return outcome
        wasted, self._wasted = self._wasted, []
        return replace(outcome, usage=(*wasted, *outcome.usage))

    def close(self) -> None:
        """The run is over: cancel whatever runs."""
        self.closed = True
        self.discard()
        self._task_group.cancel_scope.cancel()

    def _waste(self, held: _Preparation) -> None:
        if held.outcome is not None:
            self._wasted.extend(held.outcome.usage)


def _failed(outcome: SummaryOutcome | None) -> bool:
    """The summarizer failed (the deterministic fallback wrote the summary): a failed preparation."""
    return outcome is not None and outcome.fallback_reason is not None


async def _prepare(preparation: _Preparation, summarize: Callable[[], Awaitable[SummaryOutcome]]) -> None:
    """One preparation; never raises into the run's task group (an error only marks the preparation failed)."""
    with preparation.scope:
        try:
            preparation.outcome = await summarize()
        except Exception as exc:
            logger.warning("background summary failed (%s: %s); the trigger compacts synchronously", type(exc), exc)
            preparation.error = f"{type(exc).__name__}: {exc}"
        finally:
            preparation.done = True


async def run_with_background(
    handler: Callable[[], Awaitable[SummaryOutcome]], attach: Callable[[BackgroundCompaction | None], None]
) -> Any:
    """Run `handler` (a `wrap_run` handler) with a task group for background preparations, attached with `attach`
    for the run's hooks. The group is cancelled and drained before this returns, whatever the run did; the run's
    own outcome (result, error, cancellation) is passed on unchanged, never wrapped in an exception group."""
    error: BaseException | None = None
    result: Any = None
    async with anyio.create_task_group() as task_group:
        background = BackgroundCompaction(task_group)
        attach(background)
        try:
            result = await handler()
        except anyio.get_cancelled_exc_class():
            raise  # the group passes a cancellation on as it is
        except BaseException as exc:
            error = exc
        finally:
            attach(None)
            background.close()
    if error is not None:
        raise error
    return result
