"""The report's charts as plain inline SVG: no script, no library, nothing fetched; tooltips are SVG `<title>`s.

Coordinates are rounded to one decimal and lines are single `<polyline>`s, so a 1,000-request session stays a few
tens of kilobytes of chart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import cast

from ._timeline import Compaction, Eviction, OverflowRecovery, SessionTimeline

__all__ = ["MAX_LISTED", "context_chart", "cost_chart", "format_tokens"]

WIDTH, HEIGHT = 1000, 340
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 18, 36


def format_tokens(tokens: int | float) -> str:
    """1234 -> '1.2k', 200000 -> '200k', 1500000 -> '1.5M'."""
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:.3g}M"
    if tokens >= 1_000:
        return f"{tokens / 1_000:.3g}k"
    return f"{tokens:.0f}"


@dataclass(frozen=True)
class _Frame:
    """Maps request numbers and values to the plot area."""

    requests: int
    top_value: float
    height: int = HEIGHT

    def x(self, request: float) -> float:
        span = max(self.requests - 1, 1)
        return round(LEFT + (request - 1) / span * (WIDTH - LEFT - RIGHT), 1)

    def y(self, value: float) -> float:
        bottom = self.height - BOTTOM
        return round(bottom - value / self.top_value * (bottom - TOP), 1) if self.top_value else bottom

    @property
    def bottom(self) -> float:
        return self.height - BOTTOM


def _nice_top(value: float) -> float:
    """The smallest 1/2/2.5/5 x 10^n at or above `value` (an axis that ends on a round number)."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def _polylines(frame: _Frame, values: Sequence[tuple[int, float | None]], css: str) -> str:
    """One polyline per run of known values (an unknown value breaks the line instead of faking a point)."""
    runs: list[list[str]] = [[]]
    for request, value in values:
        if value is None:
            runs.append([])
        else:
            runs[-1].append(f"{frame.x(request)},{frame.y(value)}")
    return "".join(f'<polyline class="{css}" points="{" ".join(run)}"/>' for run in runs if run)


def _axes(frame: _Frame, label: Callable[[float], str]) -> str:
    ticks: list[str] = []
    for i in range(5):
        value = frame.top_value * i / 4
        y = frame.y(value)
        ticks.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}"/>')
        ticks.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{escape(label(value))}</text>')
    count = min(frame.requests, 10)
    for i in range(count):
        request = 1 + round(i * (frame.requests - 1) / max(count - 1, 1))
        x = frame.x(request)
        ticks.append(f'<text class="tick" x="{x}" y="{frame.bottom + 16}" text-anchor="middle">{request}</text>')
    ticks.append(
        f'<text class="axis-label" x="{(LEFT + WIDTH - RIGHT) / 2}" y="{frame.height - 4}" '
        'text-anchor="middle">request</text>'
    )
    return "".join(ticks)


MAX_LISTED = 200
"""The tables list the first `MAX_LISTED` events of each kind; markers past them link nowhere."""
DETAILED_MARKERS = 600
"""Above this many markers in all, their tooltips are one short line each (a page under a megabyte even when
every one of 1,000 requests compacts, evicts and recovers from an overflow)."""


def _marker(kind: str, number: int, request: int, title: str, shape: str) -> str:
    body = f'<g class="marker {kind}" data-request="{request}"><title>{escape(title)}</title>{shape}</g>'
    return f'<a href="#{kind}-{number}">{body}</a>' if number <= MAX_LISTED else body


def _compaction_marker(frame: _Frame, compaction: Compaction, peak: float, brief: bool) -> str:
    x = frame.x(compaction.request)
    before = compaction.tokens_before if compaction.tokens_before is not None else peak
    after = compaction.tokens_after if compaction.tokens_after is not None else 0
    top, low = frame.y(before), frame.y(after)
    what = "Window slide" if compaction.kind == "window" else "Compaction"
    title = (
        f"{what} {compaction.number} at request {compaction.request}: "
        f"{_tokens_or_unknown(compaction.tokens_before)} → {_tokens_or_unknown(compaction.tokens_after)} tokens"
    )
    if not brief:
        title += f", {compaction.covered_messages} messages replaced"
        if compaction.preserved:
            title += "; preserved: " + ", ".join(str(p.get("kind", "?")) for p in compaction.preserved)
    shape = f'<path d="M{x},{top}V{low}M{round(x - 6, 1)},{round(top - 10, 1)}h12l-6,9z"/>'
    return _marker("compaction", compaction.number, compaction.request, title, shape)


def _eviction_marker(frame: _Frame, eviction: Eviction, brief: bool) -> str:
    x, y = frame.x(eviction.request), frame.bottom - 7
    title = f"Eviction {eviction.number} at request {eviction.request}: {eviction.tokens:,} tokens"
    if not brief:
        title += f" of {eviction.tool_name} output saved to {eviction.path}"
    shape = f'<path d="M{round(x - 4, 1)},{y - 4}h8v8h-8z"/>'
    return _marker("eviction", eviction.number, eviction.request, title, shape)


def _overflow_marker(frame: _Frame, overflow: OverflowRecovery, brief: bool) -> str:
    x, y = frame.x(overflow.request), TOP + 4
    title = f"Overflow recovery {overflow.number} at request {overflow.request}"
    if not brief:
        steps = ", ".join(str(step) for retry in overflow.retries for step in _strings(retry.get("steps")))
        retries = len(overflow.retries)
        title += (
            f": the provider rejected the request; {retries} smaller retr{'y' if retries == 1 else 'ies'} "
            f"({steps or 'no step'})"
        )
    return _marker("overflow", overflow.number, overflow.request, title, f'<path d="M{x},{y - 6}l6,6l-6,6l-6,-6z"/>')


def _strings(value: object) -> list[str]:
    return [str(v) for v in cast("list[object]", value)] if isinstance(value, list) else []


def _tokens_or_unknown(tokens: int | None) -> str:
    return f"{tokens:,}" if tokens is not None else "?"


def context_chart(timeline: SessionTimeline) -> str:
    """Context per request against the budget and the compaction threshold, with a marker for each compaction,
    eviction and overflow recovery."""
    points = timeline.requests
    values = [v for p in points for v in (p.tokens, p.max_tokens, p.threshold_tokens) if v is not None]
    values += [c.tokens_before for c in timeline.compactions if c.tokens_before is not None]
    peak = max(values, default=1)
    frame = _Frame(max(len(points), 1), _nice_top(peak * 1.05))
    brief = len(timeline.compactions) + len(timeline.evictions) + len(timeline.overflows) > DETAILED_MARKERS
    parts = [
        f'<svg id="context-chart" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'aria-label="Context used per request against the window and the compaction threshold">',
        _axes(frame, format_tokens),
        _polylines(frame, [(p.number, p.max_tokens) for p in points], "window"),
        _polylines(frame, [(p.number, p.threshold_tokens) for p in points], "threshold"),
        _polylines(frame, [(p.number, p.tokens) for p in points], "context"),
        *(_compaction_marker(frame, c, peak, brief) for c in timeline.compactions),
        *(_eviction_marker(frame, e, brief) for e in timeline.evictions),
        *(_overflow_marker(frame, o, brief) for o in timeline.overflows),
        "</svg>",
    ]
    return "".join(parts)


def cost_chart(cumulative: Sequence[float | None]) -> str:
    """Cumulative cost in USD per request (a request of unknown price breaks the line)."""
    known = [c for c in cumulative if c is not None]
    frame = _Frame(max(len(cumulative), 1), _nice_top(max(known, default=0.0) * 1.05), height=220)
    return "".join(
        [
            f'<svg id="cost-chart" class="chart" viewBox="0 0 {WIDTH} 220" role="img" '
            'aria-label="Cumulative cost per request">',
            _axes(frame, lambda v: f"${v:,.2f}" if frame.top_value >= 0.1 else f"${v:,.4f}"),
            _polylines(frame, list(enumerate(cumulative, 1)), "cost"),
            "</svg>",
        ]
    )
