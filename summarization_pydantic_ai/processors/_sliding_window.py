"""`SlidingWindowProcessor`: drop the oldest messages when a trigger fires, with no model call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ModelRequestPart

from .._cache_policy import CachePolicy
from .._compaction import CompactionPlan, assemble, shrinks
from .._events import EventCallback, WindowTrimmed, emit_event
from .._messages import SUMMARY_METADATA_KEY, is_summary_message, summary_info
from .._pinning import WorkingSetSettings
from .._sizes import ContextSize, Measure, normalize_keep_head
from .._thinning import thin_outputs, thinning_event
from .._tokens import TokenCounter, count_tokens_approximately
from ._base import HistoryProcessor, RunInfo, measure, resolve_budget, validate_cut_settings
from ._summary_plan import new_problems, plan_cut

__all__ = ["SlidingWindowProcessor", "window_marker_for"]


def window_marker_for(messages: Sequence[ModelMessage], plan: CompactionPlan) -> tuple[ModelRequest, int]:
    """The window marker of a plan that drops `messages[plan.head_end:plan.cutoff]`, and how many original
    messages it says were removed: earlier markers count what they stood for, and messages the working set moved
    behind the marker were not removed."""
    span = messages[plan.head_end : plan.cutoff]
    span_ids = {id(m) for m in span}
    moved = sum(1 for m in plan.preserved_messages if id(m) in span_ids)
    dropped = sum(_dropped(m) if is_summary_message(m) else 1 for m in span) - moved
    return _window_marker(dropped, plan.carried), dropped


def _window_marker(dropped: int, carried: Sequence[ModelRequestPart] = ()) -> ModelRequest:
    """A short user-voice note where messages were dropped, so the kept tail never opens with the assistant; it
    carries the latest user request verbatim when that request was among the dropped messages."""
    text = f"[{dropped} earlier messages of this conversation were removed to fit the context window.]"
    info = {"kind": "window", "dropped_messages": dropped, "created_at": datetime.now(UTC).isoformat()}
    return ModelRequest(parts=[CompactionPart(content=text, metadata={SUMMARY_METADATA_KEY: info}), *carried])


@dataclass
class SlidingWindowProcessor(WorkingSetSettings, HistoryProcessor):
    """Keep the system prompt, `keep_head` leading messages and the most recent `keep`; drop the rest.

    Zero-LLM and deterministic. The cut is pair-safe (a tool call and its results stay together), the system
    prompt is never dropped, and a one-line marker replaces the dropped span so the history never opens with
    an assistant message. The working set (latest request, pinned messages, todo list, recent errors and tool
    exchanges) is kept verbatim after the marker. Sync and async token counters both work.

    Example:
        ```python
        agent = Agent('openai:gpt-4.1', capabilities=[SlidingWindowProcessor(trigger=('messages', 100), keep=40)])
        ```
    """

    trigger: Any = ("messages", 100)
    keep: Any = ("messages", 40)
    keep_head: Any = 0
    """Leading messages always kept: an `int`, `("messages", n)`, `("tokens", n)` or `("fraction", f)`."""
    max_tokens: int | None = None
    model_name: str | None = None
    reserve_output_tokens: int = 0
    token_counter: TokenCounter = count_tokens_approximately
    event_callback: EventCallback | None = None
    cache_policy: CachePolicy | None = None
    """Plan the slides by what they cost with the prompt cache counted: a token trigger then fires where the
    slide pays for its cache re-write (see `CachePolicy`), never later than the policy's hard limit."""
    _triggers: tuple[ContextSize, ...] = field(init=False, repr=False)
    _keep: ContextSize = field(init=False, repr=False)
    _keep_head: ContextSize = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._check_working_set()
        self._triggers, self._keep = validate_cut_settings(
            self.trigger,
            self.keep,
            token_counter=self.token_counter,
            reserve_output_tokens=self.reserve_output_tokens,
            max_tokens=self.max_tokens,
        )
        self._keep_head = normalize_keep_head(self.keep_head)

    async def process(self, messages: list[ModelMessage], run: RunInfo | None) -> list[ModelMessage]:
        if not messages or not self._triggers:
            return messages
        needs_budget = any(s[0] == "fraction" for s in (*self._triggers, self._keep, self._keep_head))
        budget = resolve_budget(self.max_tokens, self.model_name, self.reserve_output_tokens, run, needs_budget)
        size = await measure(messages, self.token_counter, run, budget, None)
        if not any(self._due(messages, size, t) for t in self._triggers):
            return messages
        thinned = self._thinned(messages)
        result = await self._slide(thinned, budget, size)
        if result is None and thinned is not messages:  # thinning alone brought it down: nothing to drop
            thinned_event = thinning_event(type(self).__name__, messages, thinned)
            if thinned_event is not None:
                await emit_event(self.event_callback, thinned_event)
            return thinned
        return messages if result is None else result

    async def _slide(
        self, messages: list[ModelMessage], budget: int | None, size: Measure
    ) -> list[ModelMessage] | None:
        """The history after the slide, or `None` when nothing can be dropped."""
        working_set = self._working_set_options(budget, self._triggers)
        plan = await plan_cut(messages, self._keep, self._keep_head, self.token_counter, budget, working_set)
        if plan is None:
            return None
        marker, dropped = window_marker_for(messages, plan)
        result = assemble(messages, plan, marker)
        if new_problems(messages, result) or not shrinks(messages, result):
            return None  # a marker larger than the messages it replaces would grow the context
        trimmed = WindowTrimmed(
            type(self).__name__, dropped, len(result), size.tokens, plan.preserved, plan.preserved_dropped
        )
        await emit_event(self.event_callback, trimmed)
        return result

    def _thinned(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """In a planned slide, superseded outputs become pointers first: more of the recent past fits the keep."""
        if self.cache_policy is None or not self.cache_policy.thin:
            return messages
        return thin_outputs(messages, max_chars=self.cache_policy.thin_chars)

    def _due(self, messages: list[ModelMessage], size: Measure, trigger: ContextSize) -> bool:
        if self.cache_policy is None:
            return size.reaches(trigger)
        return self.cache_policy.due(messages, size, trigger, self._keep)


def _dropped(message: ModelMessage) -> int:
    """The count a window marker recorded; 0 if it is not a count (a marker edited by hand or another tool)."""
    count = (summary_info(message) or {}).get("dropped_messages", 0)
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0
