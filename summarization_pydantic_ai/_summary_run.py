"""Summarize one compaction's span: ask the summarizer, check what it wrote against the room the compaction has
(what it replaces less what stays), ask once more on a failure, else fall back to the deterministic summary.

The step between planning a compaction and assembling it (both in `_compaction.py`), for the processor and the
middleware.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai.messages import ModelRequest, ModelRequestPart

from ._compaction_plan import CompactionPlan
from ._estimate import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    PART_OVERHEAD_TOKENS,
    approx_message_tokens,
    estimate_text_tokens,
)
from .cost._records import collect_summarizer_usage
from .summarize import DeterministicSummarizer, Summarizer, SummaryRequest
from .summarize._latest import refers_to_latest
from .summarize._models import ModelUnavailable
from .summarize._protocol import LiveRequest
from .summarize._validate import DEFAULT_REQUIRED_SECTIONS, complete_summary, summary_problems, touched_paths

__all__ = ["SummaryOutcome", "WarnOnce", "summarize_with_fallback", "summarizer_name", "summary_room"]

logger = logging.getLogger("summarization_pydantic_ai")


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
    latest_request_kept: bool = True,
) -> SummaryOutcome:
    """Run the summarizer and check its summary (`summary_problems`); on a failure ask once more, then use the
    deterministic summary and say why. Whatever wrote it, the summary gets the touched file paths it lacks.
    `latest_request_kept`: the latest request stays verbatim in the working context (a long one is then referred
    to, not copied)."""
    request = SummaryRequest(
        messages=plan.span,
        previous_summary="\n\n".join(plan.previous_summaries) or None,
        focus=focus,
        latest_user_request=latest_request,
        first_index=first_index,
        live=live,
        window_tokens=window_tokens,
        kept_messages=kept_messages,
        latest_request_kept=latest_request_kept,
    )
    # A long request stays where the working context keeps it: the summary need not (and should not) repeat it.
    required_latest = None if refers_to_latest(latest_request, kept=latest_request_kept) else latest_request
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
