"""The report's prompt-cache section: per request what was read from the cache, written to it and sent uncached
(the provider's figures, or the simulator's estimate, marked), and per reduction its net effect in dollars."""

from __future__ import annotations

from html import escape

from ..cost import CacheStamp, CostTotals, ReductionEffect, format_cost
from ._cost import CostView
from ._html import table, td

__all__ = ["cache_card", "cache_section", "savings_note"]


def cache_card(cost: CostView | None) -> tuple[str, str] | None:
    """The card of the cache-read share, when the session's requests were billed through a cache."""
    if cost is None or not cost.totals.cache.requests:
        return None
    return ("read from the prompt cache", f"{cost.totals.cache.cache_read_share:.0%}")


def savings_note(totals: CostTotals) -> str | None:
    """What the reductions spared the requests after them, with the cache re-writes they caused counted: the net
    is negative when they cost more than they saved. Without cache figures (a session recorded before them, or
    with `simulate_cache=False`), the compactions' savings at the input price, said to leave the cache out."""
    if totals.reductions:
        spared = sum(r.tokens_removed * r.later_requests for r in totals.reductions)
        return (
            f"compaction and the other {len(totals.reductions)} rewrites of the history spared later requests about "
            f"{spared:,} input tokens ({format_cost(totals.reductions_saved_usd)}), and the cache re-writes they "
            f"caused cost {format_cost(totals.rewrite_cost_usd)}: net {format_cost(totals.net_saved_usd, signed=True)}"
        )
    if totals.savings:
        return (
            f"compaction spared later requests about {totals.tokens_saved:,} input tokens "
            f"({format_cost(totals.saved_usd)} at the input price; the prompt cache was not recorded)"
        )
    return None


def cache_section(cost: CostView | None) -> str:
    if cost is None or not cost.totals.cache.requests:
        return ""
    cache = cost.totals.cache
    tokens = cache.tokens
    estimated = cache.requests - cache.reported_requests
    notes = [
        f"{cache.cache_read_share:.0%} of {tokens.input_tokens:,} input tokens read from the cache: "
        f"{tokens.cache_read_tokens:,} read, {tokens.cache_write_tokens:,} written, "
        f"{tokens.uncached_tokens:,} uncached",
        f"cost with the cache counted {format_cost(cache.cost_usd)}",
        f"{cache.reported_requests:,} requests as the provider reported them, {estimated:,} estimated by the simulator",
    ]
    if cache.reported_requests:
        reported, predicted = cache.reported, cache.predicted_on_reported
        notes.append(
            f"on the reported requests the simulator predicted {predicted.cache_read_tokens:,} read / "
            f"{predicted.cache_write_tokens:,} written against the provider's {reported.cache_read_tokens:,} / "
            f"{reported.cache_write_tokens:,}"
        )
    return (
        f'<h2>Prompt cache</h2><div class="panel"><p class="muted">{escape("; ".join(notes))}.</p>'
        f"{_requests(cost.cache_requests)}</div><h2>Reductions and the cache</h2>"
        f"{_reductions(cost.totals.reductions)}"
    )


def _requests(stamps: tuple[tuple[int, CacheStamp], ...]) -> str:
    rows = [
        [
            td(str(number), number=True),
            td(f"{s.tokens.cache_read_tokens:,}", number=True),
            td(f"{s.tokens.cache_write_tokens:,}", number=True),
            td(f"{s.tokens.uncached_tokens:,}", number=True),
            td(s.source),
            td(_predicted(s) if s.source == "reported" else ""),
            td("" if s.changed_at is None else f"at message {s.changed_at}" if s.changed_at >= 0 else "head"),
        ]
        for number, s in stamps
    ]
    headers = ("request", "read", "written", "uncached", "figures", "simulator (read / written)", "rewrote")
    return table(headers, rows, "No request was billed through the cache.")


def _predicted(stamp: CacheStamp) -> str:
    return f"{stamp.predicted.cache_read_tokens:,} / {stamp.predicted.cache_write_tokens:,}"


def _reductions(reductions: tuple[ReductionEffect, ...]) -> str:
    rows = [
        [
            td(str(r.request), number=True),
            td("head" if r.changed_at < 0 else str(r.changed_at), number=True),
            td(f"{r.tokens_removed:,}", number=True),
            td(f"{r.rewrite_tokens:,}", number=True),
            td(format_cost(r.rewrite_cost_usd), number=True),
            td(f"{r.later_requests:,}", number=True),
            td(format_cost(r.saved_usd), number=True),
            td(format_cost(r.net_usd, signed=True), number=True),
        ]
        for r in reductions
    ]
    headers = ("request", "at message", "tokens removed", "re-written", "re-write cost", "requests", "saved", "net")
    return table(headers, rows, "No request rewrote the cached history.")
