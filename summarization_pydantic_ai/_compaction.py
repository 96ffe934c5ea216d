"""Plan, summarize and assemble one compaction: kept head + summary + kept tail.

Shared by [`SummarizationProcessor`][summarization_pydantic_ai.SummarizationProcessor] and the middleware, so
there is one place that decides what is replaced and one that builds the result.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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
from ._estimate import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    PART_OVERHEAD_TOKENS,
    approx_message_tokens,
    estimate_text_tokens,
)
from ._events import CompactionCompleted
from ._merged_pins import merge_into_summary
from ._messages import SUMMARY_METADATA_KEY, get_message_id, summary_part
from ._sizes import normalize_keep_head
from ._tokens import count_tokens_approximately
from ._working_set import WorkingSetOptions, apply_working_set
from .cost._records import SUMMARIZER_USAGE_KEY, collect_summarizer_usage
from .summarize import DeterministicSummarizer, Summarizer, SummaryRequest
from .summarize._latest import refers_to_latest
from .summarize._models import ModelUnavailable
from .summarize._protocol import LiveRequest
from .summarize._validate import DEFAULT_REQUIRED_SECTIONS, complete_summary, summary_problems, touched_paths

__all__ = [
    "NOT_SMALLER",
    "CompactionPlan",
    "SummaryOutcome",
    "WarnOnce",
    "assemble",
    "plan_compaction",
    "shrinks",
    "summarize_with_fallback",
    "summary_room",
]

logger = logging.getLogger("summarization_pydantic_ai")


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


@dataclass(frozen=True)
class SummaryOutcome:
    text: str
    summarizer: str
    duration_s: float
    fallback_reason: str | None = None
    usage: tuple[dict[str, Any], ...] = ()
    """The model calls the summarizer made (`report_summarizer_usage`), recorded under `SUMMARIZER_USAGE_KEY`."""


def summarizer_name(summarizer: Summarizer) -> str:
    return str(getattr(summarizer, "name", type(summarizer).__name__))


class WarnOnce:
    """Logs the first summarizer fallback of its owner (a processor or middleware) as a warning, the later ones
    at debug level: offline, every compaction falls back, and one warning says it."""

    def __init__(self) -> None:
        self.warned = False

    def warn(self, summarizer: str, reason: str) -> None:
        level = logging.DEBUG if self.warned else logging.WARNING
        self.warned = True
        logger.log(level, "summarizer %s failed (%s); using the deterministic summary", summarizer, reason)


async def summarize_with_fallback(
    plan: CompactionPlan,
    summarizer: Summarizer,
    *,
    focus: str | None,
    latest_request: str | None,
    first_index: int,
    fallback: DeterministicSummarizer | None = None,
    live: LiveRequest | None = None,
    window_tokens: int | None = None,
    kept_messages: int = 0,
    required_sections: Sequence[str] = DEFAULT_REQUIRED_SECTIONS,
    warning: WarnOnce | None = None,
) -> SummaryOutcome:
    """Run the summarizer and check its summary (`summary_problems`); on a failure ask once more, then use the
    deterministic summary and say why. Whatever wrote it, the summary gets the touched file paths it lacks."""
    request = SummaryRequest(
        messages=plan.span,
        previous_summary="\n\n".join(plan.previous_summaries) or None,
        focus=focus,
        latest_user_request=latest_request,
        first_index=first_index,
        live=live,
        window_tokens=window_tokens,
        kept_messages=kept_messages,
        # Every plan keeps the latest request verbatim: before or after the span, moved with the working set, or
        # carried by the summary's request (`plan.carried`). A long one is therefore referred to, not copied.
        latest_request_kept=True,
    )
    # A long request stays where the working context keeps it: the summary need not (and should not) repeat it.
    required_latest = None if refers_to_latest(latest_request, kept=True) else latest_request
    started = time.perf_counter()
    with collect_summarizer_usage() as calls:
        outcome = await _summarize(plan, summarizer, request, required_latest, fallback, required_sections, warning)
    return replace(outcome, duration_s=time.perf_counter() - started, usage=tuple(calls))


async def _summarize(
    plan: CompactionPlan,
    summarizer: Summarizer,
    request: SummaryRequest,
    latest_request: str | None,
    fallback: DeterministicSummarizer | None,
    required_sections: Sequence[str],
    warning: WarnOnce | None,
) -> SummaryOutcome:
    paths = touched_paths(plan.span)
    if fallback is None:  # a configured deterministic summarizer (its `max_chars`) is its own fallback
        fallback = summarizer if isinstance(summarizer, DeterministicSummarizer) else DeterministicSummarizer()
    reasons: list[str] = []
    asked = summary_room(plan, _MIN_SUMMARY_TOKENS) >= _MIN_SUMMARY_TOKENS
    if not isinstance(summarizer, DeterministicSummarizer) and asked:
        for _ in range(2):
            try:
                text = await _checked_summary(summarizer, request, plan, required_sections, latest_request)
            except ModelUnavailable as exc:  # asking again would fail the same way
                reasons.append(f"{type(exc).__name__}: {exc}")
                break
            except Exception as exc:
                reasons.append(f"{type(exc).__name__}: {exc}")
                continue
            text = complete_summary(text, required_sections=(), latest_request=None, paths=paths)
            try:
                _check_summary_size(text, plan, summarizer)
            except ValueError as exc:  # the touched paths it lacked made it too long
                reasons.append(f"{type(exc).__name__}: with the touched file paths, {exc}")
                break
            return SummaryOutcome(text, summarizer_name(summarizer), 0.0)
        (warning or WarnOnce()).warn(summarizer_name(summarizer), reasons[-1])
    elif not isinstance(summarizer, DeterministicSummarizer):
        reasons.append("the span is too small for a summary to make the context smaller: the summarizer was not asked")
    # The deterministic summary is sized to what it replaces (and to its own budget, `max_chars`).
    room = summary_room(plan, fallback.max_chars // CHARS_PER_TOKEN)
    if fallback.max_chars > room * CHARS_PER_TOKEN:
        fallback = replace(fallback, max_chars=room * CHARS_PER_TOKEN)
    text = complete_summary(
        fallback.summarize_sync(request),
        required_sections=required_sections,
        latest_request=latest_request,
        paths=paths,
    )
    reason = " | ".join(dict.fromkeys(reasons)) if reasons else None
    return SummaryOutcome(text, fallback.name, 0.0, reason)


async def _checked_summary(
    summarizer: Summarizer,
    request: SummaryRequest,
    plan: CompactionPlan,
    required_sections: Sequence[str],
    latest_request: str | None,
) -> str:
    text = await summarizer.summarize(request)
    if not isinstance(text, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"the summarizer returned {type(text).__name__}, not str")
    text = text.strip()
    _check_summary_size(text, plan, summarizer)
    problems = summary_problems(text, required_sections=required_sections, latest_request=latest_request)
    if problems:
        raise ValueError("summary refused: " + "; ".join(problems))
    return text


_MIN_SUMMARY_TOKENS = 60
"""Below this room a summary with its section headings cannot make the context smaller: no model is asked."""


def _text_tokens(text: str) -> int:
    return estimate_text_tokens(text)


def summary_room(plan: CompactionPlan, limit: int) -> int:
    """How many tokens (estimated) a summary's text may take so that the compaction leaves fewer tokens than it
    found, at most `limit`: what it replaces (the span, the earlier summaries) less what stays (the carried latest
    request, the split-off system prompt) and the summary message's own overhead. Counted only up to `limit`, so
    a long span costs no more than a short one."""
    room = -(MESSAGE_OVERHEAD_TOKENS + PART_OVERHEAD_TOKENS) - sum(map(_part_tokens, plan.carried))
    if plan.system_head is not None:
        room -= approx_message_tokens(plan.system_head)
    room += sum(_text_tokens(text) + MESSAGE_OVERHEAD_TOKENS + PART_OVERHEAD_TOKENS for text in plan.previous_summaries)
    for message in plan.span:
        if room >= limit:
            return limit
        room += approx_message_tokens(message)
    return max(min(room, limit), 0)


def _part_tokens(part: ModelRequestPart) -> int:
    return approx_message_tokens(ModelRequest(parts=[part])) - MESSAGE_OVERHEAD_TOKENS


NOT_SMALLER = "the summary would not make the history smaller"
"""The reason of the `CompactionSkipped` event of a compaction that was not committed because of its size."""


def shrinks(before: Sequence[ModelMessage], after: Sequence[ModelMessage]) -> bool:
    """Whether a compaction leaves fewer tokens (estimated) than it found. One that does not is never committed:
    it would rewrite the provider's cached prefix and save nothing."""
    return count_tokens_approximately(after) < count_tokens_approximately(before)


def _check_summary_size(text: str, plan: CompactionPlan, summarizer: Summarizer) -> None:
    """A summary longer than its room (what it replaces, less what stays), or than the summarizer's
    `max_summary_tokens`, would grow the context it was meant to shrink: refuse it, so the deterministic
    fallback (sized to the room) is used instead."""
    tokens = _text_tokens(text)
    limit = getattr(summarizer, "max_summary_tokens", None)
    if isinstance(limit, int) and tokens > limit:
        raise ValueError(f"the summary has about {tokens:,} tokens, over max_summary_tokens={limit:,}")
    room = summary_room(plan, tokens)
    if tokens > room:
        raise ValueError(f"the summary has about {tokens:,} tokens, more than the {room:,} it may take")


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
