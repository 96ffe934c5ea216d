"""The report as one self-contained HTML page: inline CSS and SVG, no script, no font, no image, no link out."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from .._render import elide_middle
from ..cost import Spend, format_cost
from ._cache import cache_card, cache_section, savings_note
from ._chart import context_chart, cost_chart, format_tokens
from ._cost import CostView
from ._html import table as _table
from ._html import td as _td
from ._timeline import SessionTimeline, ToolOutput

__all__ = ["CostView", "render_page"]

LARGEST_TOOL_OUTPUTS = 15
SUMMARY_CHARS_BUDGET = 250_000
"""All summaries together show at most this many characters (each at least `_MIN_SUMMARY_CHARS`), so a session
with hundreds of compactions still makes a page well under a megabyte; the store keeps every summary whole."""
_MIN_SUMMARY_CHARS = 2_000
_MAX_SUMMARY_CHARS = 20_000


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.sub{color:#57606a;margin:0 0 16px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:18px}
.panel{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:10px}
svg.chart{width:100%;height:auto;display:block}
.grid{stroke:#eaeef2}.tick,.axis-label{font-size:11px;fill:#57606a}
polyline{fill:none;stroke-width:1.6}
.context{stroke:#0969da}.window{stroke:#cf222e;stroke-dasharray:6 4}.threshold{stroke:#bf8700;stroke-dasharray:3 3}
.cost{stroke:#1a7f37}
.compaction path{fill:#8250df;stroke:#8250df;stroke-width:2}
.eviction path{fill:#fb8500}.overflow path{fill:#cf222e}
.legend{display:flex;flex-wrap:wrap;gap:16px;font-size:12px;color:#57606a;margin:6px 0 0 64px}
.legend i{display:inline-block;width:14px;height:3px;vertical-align:middle;margin-right:5px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;white-space:nowrap}
code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:8px;margin:6px 0 0}
details{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;margin:6px 0}
summary{cursor:pointer}.muted{color:#57606a}
"""


def _cards(timeline: SessionTimeline, cost: CostView | None) -> str:
    known = [p.tokens for p in timeline.requests if p.tokens is not None]
    known += [c.tokens_before for c in timeline.compactions if c.tokens_before is not None]
    items = [
        ("requests", f"{len(timeline.requests):,}"),
        ("messages recorded", f"{timeline.messages:,}"),
        ("compactions", str(sum(c.kind == "summary" for c in timeline.compactions))),
        ("window slides", str(sum(c.kind == "window" for c in timeline.compactions))),
        ("evictions", str(len(timeline.evictions))),
        ("overflow recoveries", str(len(timeline.overflows))),
        ("peak context", format_tokens(max(known)) if known else "?"),
    ]
    if cost is not None:
        items.append(("total cost", format_cost(cost.totals)))
    if (card := cache_card(cost)) is not None:
        items.append(card)
    return '<div class="cards">' + "".join(f'<div class="card"><b>{v}</b>{k}</div>' for k, v in items) + "</div>"


def _tokens(value: int | None) -> str:
    return f"{value:,}" if value is not None else "?"


def _compactions(timeline: SessionTimeline) -> str:
    rows = [
        [
            f'<td id="compaction-{c.number}">{c.number}</td>',
            _td(str(c.request), number=True),
            _td("window slide" if c.kind == "window" else "summary"),
            _td(f"{_tokens(c.tokens_before)} → {_tokens(c.tokens_after)}", number=True),
            _td(str(c.covered_messages), number=True),
            _td(
                ", ".join(
                    f"{p.get('kind', '?')} ({p.get('messages', '?')} msg, {p.get('tokens', '?')} tok)"
                    for p in c.preserved
                )
                or "—"
            ),
            _td((c.summarizer or "—") + (f" (fallback: {c.fallback_reason})" if c.fallback_reason else "")),
        ]
        for c in timeline.compactions
    ]
    headers = ("#", "request", "kind", "tokens before → after", "messages replaced", "preserved", "summarizer")
    return _table(headers, rows, "No compaction: the context never reached the threshold.")


def _evictions(timeline: SessionTimeline) -> str:
    rows = [
        [
            f'<td id="eviction-{e.number}">{e.number}</td>',
            _td(str(e.request), number=True),
            _td(e.tool_name),
            _td(f"{e.tokens:,}", number=True),
            _td(
                f"<code>{escape(e.path)}</code>" + (" (removed by retention)" if e.state == "removed" else ""), raw=True
            ),
        ]
        for e in timeline.evictions
    ]
    return _table(("#", "request", "tool", "tokens", "file"), rows, "No tool output was evicted.")


def _overflows(timeline: SessionTimeline) -> str:
    rows = [
        [
            f'<td id="overflow-{o.number}">{o.number}</td>',
            _td(str(o.request), number=True),
            _td(
                "; ".join(
                    f"{', '.join(map(str, r.get('steps') or [])) or 'no step'}: "
                    f"{_tokens(r.get('tokens_before'))} → {_tokens(r.get('tokens_after'))}"
                    for r in o.retries
                )
            ),
        ]
        for o in timeline.overflows
    ]
    return _table(("#", "request", "retries (steps: tokens before → after)"), rows, "No overflow recovery was needed.")


def _largest(outputs: Sequence[ToolOutput]) -> str:
    largest = sorted(outputs, key=lambda o: o.tokens, reverse=True)[:LARGEST_TOOL_OUTPUTS]
    rows = [
        [
            _td(str(o.request), number=True),
            _td(o.tool_name),
            _td(f"{o.tokens:,}", number=True),
            _td(f"evicted to <code>{escape(o.evicted_to)}</code>" if o.evicted_to else "in the history", raw=True),
            _td(f"<code>{escape(o.preview[:160])}</code>", raw=True),
        ]
        for o in largest
    ]
    return _table(("request", "tool", "tokens", "where", "beginning"), rows, "No tool output.")


def _summaries(timeline: SessionTimeline) -> str:
    """The latest summary open, the earlier ones folded; each cut in the middle to its share of
    `SUMMARY_CHARS_BUDGET` (at least `_MIN_SUMMARY_CHARS`), the oldest left out once the budget is spent."""
    summaries = [c for c in timeline.compactions if c.kind == "summary"]
    if not summaries:
        return '<p class="muted">No summary was written.</p>'
    each = max(_MIN_SUMMARY_CHARS, min(_MAX_SUMMARY_CHARS, SUMMARY_CHARS_BUDGET // len(summaries)))
    shown = summaries[-max(SUMMARY_CHARS_BUDGET // each, 1) :]
    blocks = [
        f"<details{' open' if c is summaries[-1] else ''}><summary>Summary {c.number} (before request {c.request}, "
        f"{c.covered_messages} messages, {len(c.text):,} characters)</summary>"
        f"<pre>{escape(elide_middle(c.text, each))}</pre></details>"
        for c in shown
    ]
    left_out = len(summaries) - len(shown)
    if left_out:
        blocks.insert(0, f'<p class="muted">{left_out:,} earlier summaries not shown (the history file has them).</p>')
    return "".join(blocks)


def _legend() -> str:
    items = [
        ("#0969da", "context per request"),
        ("#bf8700", "compaction threshold"),
        ("#cf222e", "window (budget)"),
        ("#8250df", "compaction: before → after"),
        ("#fb8500", "eviction"),
        ("#cf222e", "overflow recovery"),
    ]
    return (
        '<div class="legend">' + "".join(f'<span><i style="background:{c}"></i>{t}</span>' for c, t in items) + "</div>"
    )


def _spent(spend: Spend) -> str:
    return format_cost(spend) if spend.requests else "nothing (no request)"


def _cost_section(cost: CostView | None) -> str:
    if cost is None:
        return ""
    totals = cost.totals
    total = totals.total
    notes = [
        f"Total {format_cost(totals)} for {total.requests:,} model requests",
        f"the agent {_spent(totals.agent)}, the summarizer {_spent(totals.summarizer)}, "
        f"overflow retries {_spent(totals.overflow_retry)}",
        f"{total.input_tokens:,} input tokens ({total.cache_read_tokens:,} read from cache), "
        f"{total.output_tokens:,} output tokens",
    ]
    if (note := savings_note(totals)) is not None:
        notes.append(note)
    if totals.unpriced_models:
        notes.append(
            "price unknown for " + ", ".join(totals.unpriced_models) + " (the line counts the priced requests only)"
        )
    drawn = any(c is not None for c in cost.cumulative)
    return (
        f'<h2>Cumulative cost</h2><div class="panel">{cost_chart(cost.cumulative) if drawn else ""}'
        f'<p class="muted">{escape("; ".join(notes))}.</p></div>'
    )


def render_page(timeline: SessionTimeline, *, title: str, source: str, cost: CostView | None) -> str:
    """The whole page."""
    return "".join(
        [
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width,initial-scale=1">',
            # No request may leave the page: only inline styles and data are allowed.
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
            f"<title>{escape(title)}</title><style>{_CSS}</style></head><body><main>",
            f'<h1>{escape(title)}</h1><p class="sub">{escape(source)}</p>',
            _cards(timeline, cost),
            '<h2>Context per request</h2><div class="panel">',
            context_chart(timeline),
            _legend(),
            "</div>",
            _cost_section(cost),
            cache_section(cost),
            "<h2>Compactions</h2>",
            _compactions(timeline),
            "<h2>Evictions</h2>",
            _evictions(timeline),
            "<h2>Overflow recoveries</h2>",
            _overflows(timeline),
            f"<h2>Largest tool outputs</h2>{_largest(timeline.tool_outputs)}",
            f"<h2>Summaries</h2>{_summaries(timeline)}",
            "</main></body></html>\n",
        ]
    )
