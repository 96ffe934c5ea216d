"""A session as the report shows it, read from the history store's records alone (no second log).

Request `k` is the k-th `ModelResponse` of the session: what the records hold between response `k-1` and
response `k` (new tool outputs, a summary) happened at request `k`. Each response carries the request's measure
(`REQUEST_METADATA_KEY`, written by `ContextManagerMiddleware`); a summary record says what its compaction did;
an evicted tool output's metadata names its file and size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart

from .._estimate import estimate_text_tokens
from .._messages import summary_info, summary_part
from .._render import part_text
from ..context_manager._stamp import REQUEST_METADATA_KEY

__all__ = [
    "EVICTION_METADATA_KEY",
    "Compaction",
    "Eviction",
    "OverflowRecovery",
    "RequestPoint",
    "SessionTimeline",
    "ToolOutput",
    "build_timeline",
]

EVICTION_METADATA_KEY = "pydantic_deep.eviction"
"""The harness's `EvictionProcessor` marks an evicted tool output's metadata under this key (path, tokens, lines,
kind, state). The engine never imports the harness: the key is read by value (a test checks both agree)."""

_EVICTED_STATES = ("archived", "removed")


@dataclass(frozen=True)
class RequestPoint:
    """One model request: its size as measured before it was sent, against the budget and the threshold."""

    number: int
    tokens: int | None
    """`None` when neither the middleware's measure nor the provider's usage is known."""
    max_tokens: int | None
    threshold_tokens: int | None
    measured: bool
    """True: the middleware's measure; False: the provider's input tokens (a response the middleware did not see)."""
    model_name: str | None = None


@dataclass(frozen=True)
class Compaction:
    """A summary (or window marker) that replaced part of the working context before request `request`."""

    number: int
    request: int
    kind: str
    """`'summary'` or `'window'` (a sliding-window marker: messages dropped, nothing summarized)."""
    tokens_before: int | None
    tokens_after: int | None
    covered_messages: int
    preserved: tuple[Mapping[str, Any], ...]
    """What the working set kept verbatim: `kind`, `messages`, `tokens` per entry."""
    summarizer: str | None
    fallback_reason: str | None
    text: str


@dataclass(frozen=True)
class Eviction:
    """A tool output saved to a file, replaced in the context by its preview."""

    number: int
    request: int
    tool_name: str
    tool_call_id: str
    tokens: int
    path: str
    state: str


@dataclass(frozen=True)
class OverflowRecovery:
    """A request the provider rejected as too long, retried smaller until it was accepted."""

    number: int
    request: int
    retries: tuple[Mapping[str, Any], ...]
    """`steps`, `tokens_before`, `tokens_after` per retry."""


@dataclass(frozen=True)
class ToolOutput:
    """A tool output at its full size (an evicted one counts what was evicted, not its preview)."""

    request: int
    tool_name: str
    tool_call_id: str
    tokens: int
    evicted_to: str | None
    preview: str


@dataclass
class SessionTimeline:
    """Everything the report draws, request by request."""

    requests: list[RequestPoint] = field(default_factory=list[RequestPoint])
    compactions: list[Compaction] = field(default_factory=list[Compaction])
    evictions: list[Eviction] = field(default_factory=list[Eviction])
    overflows: list[OverflowRecovery] = field(default_factory=list[OverflowRecovery])
    tool_outputs: list[ToolOutput] = field(default_factory=list[ToolOutput])
    """Every tool output, in order (the report lists the largest)."""
    messages: int = 0


def _dict(value: object) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _list(value: object) -> list[Any]:
    return cast(list[Any], value) if isinstance(value, list) else []


class _Builder:
    def __init__(self) -> None:
        self.timeline = SessionTimeline()

    @property
    def _next_request(self) -> int:
        return len(self.timeline.requests) + 1

    def add(self, message: ModelMessage) -> None:
        self.timeline.messages += 1
        if isinstance(message, ModelResponse):
            self._response(message)
        elif summary_part(message) is not None:
            self._summary(message)
        else:
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    self._tool_output(part)

    def _response(self, response: ModelResponse) -> None:
        stamp = _dict((response.metadata or {}).get(REQUEST_METADATA_KEY))
        number = self._next_request
        tokens = _int(stamp.get("tokens"))
        measured = tokens is not None
        if tokens is None and response.usage.input_tokens:
            tokens = response.usage.input_tokens
        point = RequestPoint(
            number,
            tokens,
            _int(stamp.get("max_tokens")),
            _int(stamp.get("threshold_tokens")),
            measured,
            response.model_name,
        )
        self.timeline.requests.append(point)
        retries = tuple(_dict(r) for r in _list(stamp.get("overflow")))
        if retries:
            self.timeline.overflows.append(OverflowRecovery(len(self.timeline.overflows) + 1, number, retries))

    def _summary(self, message: ModelRequest) -> None:
        info = summary_info(message) or {}
        part = summary_part(message)
        window = info.get("kind") == "window"
        covered = _int(info.get("dropped_messages") if window else info.get("covered_messages")) or 0
        compaction = Compaction(
            number=len(self.timeline.compactions) + 1,
            request=self._next_request,
            kind="window" if window else "summary",
            tokens_before=_int(info.get("tokens_before")),
            tokens_after=_int(info.get("tokens_after")),
            covered_messages=covered,
            preserved=tuple(_dict(p) for p in _list(info.get("preserved"))),
            summarizer=info.get("summarizer") if isinstance(info.get("summarizer"), str) else None,
            fallback_reason=info.get("fallback_reason") if isinstance(info.get("fallback_reason"), str) else None,
            text=(part.content if part is not None else "") or "",
        )
        self.timeline.compactions.append(compaction)
        # A summary record repeats the parts of the requests merged into it (already recorded on their own).

    def _tool_output(self, part: ToolReturnPart) -> None:
        eviction = _dict(_dict(part.metadata).get(EVICTION_METADATA_KEY))
        path, evicted_tokens = eviction.get("path"), _int(eviction.get("tokens"))
        evicted = eviction.get("state") in _EVICTED_STATES and isinstance(path, str) and evicted_tokens is not None
        text = part_text(part)
        tokens = evicted_tokens if evicted and evicted_tokens is not None else estimate_text_tokens(text)
        output = ToolOutput(
            self._next_request, part.tool_name, part.tool_call_id, tokens, path if evicted else None, text[:300]
        )
        self.timeline.tool_outputs.append(output)
        if evicted:
            self.timeline.evictions.append(
                Eviction(
                    len(self.timeline.evictions) + 1,
                    self._next_request,
                    part.tool_name,
                    part.tool_call_id,
                    tokens,
                    str(path),
                    str(eviction.get("state")),
                )
            )

    def finish(self) -> SessionTimeline:
        self._fill_compaction_after()
        return self.timeline

    def _fill_compaction_after(self) -> None:
        """A compaction's "after" is the size of the request it made room for, as the chart plots it (the
        middleware measured that request after compacting); the record's own count is the fallback."""
        points = {p.number: p for p in self.timeline.requests}
        for i, compaction in enumerate(self.timeline.compactions):
            point = points.get(compaction.request)
            later = any(c.request == compaction.request for c in self.timeline.compactions[i + 1 :])
            if point is not None and point.measured and point.tokens is not None and not later:
                self.timeline.compactions[i] = replace(compaction, tokens_after=point.tokens)


def build_timeline(messages: Sequence[ModelMessage]) -> SessionTimeline:
    """The report's view of a session's records (`HistoryStore.load_all()`: every message and summary, in order)."""
    builder = _Builder()
    for message in messages:
        builder.add(message)
    return builder.finish()
