"""Plan and assemble one compaction: kept head + summary + kept tail, and the event that reports it.

Shared by [`SummarizationProcessor`][summarization_pydantic_ai.SummarizationProcessor] and the middleware, so
there is one place that decides what is replaced and one that builds the result. The summary in between is
written by `_summary_run.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    SystemPromptPart,
    UserPromptPart,
)

from ._compaction_plan import CompactionPlan, latest_user_request_at
from ._cutoff import find_safe_cutoff, head_count, safe_head_end
from ._events import CompactionCompleted
from ._merged_pins import merge_into_summary
from ._messages import SUMMARY_METADATA_KEY, get_message_id, summary_part
from ._sizes import normalize_keep_head
from ._summary_run import SummaryOutcome
from ._tokens import count_tokens_approximately
from ._working_set import WorkingSetOptions
from ._working_set_plan import apply_working_set
from .cost._records import SUMMARIZER_USAGE_KEY

__all__ = [
    "NOT_SMALLER",
    "CompactionPlan",
    "assemble",
    "assemble_merged",
    "build_summary_message",
    "completed_event",
    "plan_compaction",
    "shrinks",
]


def _carried_request(messages: Sequence[ModelMessage], head_end: int, cutoff: int) -> tuple[ModelRequestPart, ...]:
    latest = latest_user_request_at(messages)
    if latest is None or not head_end <= latest < cutoff:
        return ()
    return tuple(p for p in messages[latest].parts if isinstance(p, UserPromptPart))


def _system_head(first: ModelMessage) -> tuple[ModelRequest | None, bool]:
    """Split the system prompt off the first request. Returns (head request, whether `first` is wholly head)."""
    if not isinstance(first, ModelRequest):
        return None, False
    system = [p for p in first.parts if isinstance(p, SystemPromptPart) and p.scope == "conversation"]
    if not system:
        return None, False
    if len(system) == len(first.parts):
        return None, True
    return replace(first, parts=system, metadata=None), False


def plan_compaction(
    messages: Sequence[ModelMessage],
    keep: Any,
    *,
    keep_head: Any = 0,
    max_tokens: int | None = None,
    message_tokens: Callable[[ModelMessage], int] | None = None,
    working_set: WorkingSetOptions | None = None,
    head_tokens: Callable[[ModelMessage], int] | None = None,
) -> CompactionPlan | None:
    """Decide what to replace, or `None` when there is nothing new to summarize; with `working_set`, the guaranteed
    working set is taken out of the span (see `apply_working_set`). `keep_head`: an `int` number of leading
    messages or a `ContextSize` (token keeps count with `head_tokens`, default: the approximate estimate)."""
    if not messages:
        return None
    system_head, first_is_head = _system_head(messages[0])
    head = head_count(messages, normalize_keep_head(keep_head), max_tokens=max_tokens, message_tokens=head_tokens)
    head_end = safe_head_end(messages, max(head, 1 if first_is_head else 0))
    cutoff = find_safe_cutoff(messages, keep, max_tokens=max_tokens, message_tokens=message_tokens)
    if cutoff <= head_end:
        return None
    if head_end > 0:
        system_head = None  # the first request is kept whole
    span: list[ModelMessage] = []
    previous: list[str] = []
    previous_ids: list[str] = []
    for message in messages[head_end:cutoff]:
        part = summary_part(message)
        if part is None:
            span.append(message)
            continue
        previous.append(part.content or "")
        message_id = get_message_id(message)
        if message_id:
            previous_ids.append(message_id)
        # A summary request can carry more (a prompt merged into it): that part is conversation to summarize.
        rest = [p for p in message.parts if not isinstance(p, CompactionPart | SystemPromptPart)]
        if rest:
            span.append(replace(message, parts=rest))
    if not span:
        return None
    carried = _carried_request(messages, head_end, cutoff)
    plan = CompactionPlan(head_end, cutoff, system_head, tuple(span), tuple(previous), tuple(previous_ids), carried)
    return plan if working_set is None else apply_working_set(messages, plan, working_set)


NOT_SMALLER = "the summary would not make the history smaller"
"""The reason of the `CompactionSkipped` event of a compaction that was not committed because of its size."""


def shrinks(before: Sequence[ModelMessage], after: Sequence[ModelMessage]) -> bool:
    """Whether a compaction leaves fewer tokens (estimated) than it found. One that does not is never committed:
    it would rewrite the provider's cached prefix and save nothing."""
    return count_tokens_approximately(after) < count_tokens_approximately(before)


def build_summary_message(plan: CompactionPlan, outcome: SummaryOutcome, *, focus: str | None) -> ModelRequest:
    """The summary as a `ModelRequest` with one `CompactionPart` whose metadata says what it covers."""
    covers = [mid for mid in map(get_message_id, plan.span) if mid]
    info: dict[str, Any] = {
        "covers": covers,
        "covered_messages": len(plan.span),
        "replaces_summaries": list(plan.previous_summary_ids),
        "summarizer": outcome.summarizer,
        # What the working set kept verbatim (for the session report; the event has the message ids).
        "preserved": [{"kind": p.kind, "messages": p.messages, "tokens": p.tokens} for p in plan.preserved],
        "created_at": datetime.now(UTC).isoformat(),
    }
    if covers:
        info["first_id"], info["last_id"] = covers[0], covers[-1]
    if outcome.fallback_reason:
        info["fallback_reason"] = outcome.fallback_reason
    if focus:
        info["focus"] = focus
    metadata: dict[str, Any] = {SUMMARY_METADATA_KEY: info}
    if outcome.usage:
        metadata[SUMMARIZER_USAGE_KEY] = list(outcome.usage)
    summary = CompactionPart(content=outcome.text, metadata=metadata)
    return ModelRequest(parts=[summary, *plan.carried])


def assemble_merged(
    messages: Sequence[ModelMessage], plan: CompactionPlan, summary: ModelRequest
) -> tuple[list[ModelMessage], ModelRequest]:
    """Like `assemble`, but with no two requests in a row: the system prompt, the summary and the requests that
    open the tail become one request. pydantic-ai merges consecutive requests when a history is passed to a
    new run, and a merged request loses its message-level metadata (a stable id); building the merged form
    here keeps every id stable."""
    head = list(messages[: plan.head_end])
    system_parts = list(plan.system_head.parts) if plan.system_head is not None else []
    if head and all(isinstance(m, ModelRequest) for m in head):
        system_parts = [p for m in head for p in m.parts] + system_parts
        head = []
    summary, kept = merge_into_summary(summary, plan.preserved_messages)
    tail = [*kept, *messages[plan.cutoff :]]
    leading: list[ModelRequest] = []
    while tail and isinstance(tail[0], ModelRequest):
        leading.append(tail.pop(0))  # type: ignore[arg-type]
    instructions = next((m.instructions for m in reversed(leading) if m.instructions), None)
    merged = replace(
        summary,
        parts=[*system_parts, *summary.parts, *(p for m in leading for p in m.parts)],
        instructions=instructions,
    )
    return [*head, merged, *tail], merged


def assemble(messages: Sequence[ModelMessage], plan: CompactionPlan, summary: ModelRequest) -> list[ModelMessage]:
    """Kept head + (split-off system prompt) + summary + working set + kept tail."""
    head = list(messages[: plan.head_end])
    if plan.system_head is not None:
        head.append(plan.system_head)
    summary, kept = merge_into_summary(summary, plan.preserved_messages)
    return [*head, summary, *kept, *messages[plan.cutoff :]]


def completed_event(
    processor: str,
    messages: Sequence[ModelMessage],
    result: Sequence[ModelMessage],
    plan: CompactionPlan,
    outcome: SummaryOutcome,
    *,
    tokens_before: int,
    tokens_after: int,
    model: str | None,
    prepared_in_background: bool = False,
) -> CompactionCompleted:
    """The event that reports one finished compaction."""
    return CompactionCompleted(
        processor=processor,
        messages_before=len(messages),
        messages_after=len(result),
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        cutoff=plan.cutoff,
        summarized_messages=len(plan.span),
        duration_s=outcome.duration_s,
        summarizer=outcome.summarizer,
        model=model,
        fallback_reason=outcome.fallback_reason,
        preserved=plan.preserved,
        preserved_dropped=plan.preserved_dropped,
        prepared_in_background=prepared_in_background,
    )
