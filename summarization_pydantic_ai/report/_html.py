"""The report's HTML building blocks shared by its sections."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ._chart import MAX_LISTED

__all__ = ["table", "td"]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> str:
    """The first `MAX_LISTED` rows, and a line saying how many more there are (the store keeps them all)."""
    if not rows:
        return f'<p class="muted">{escape(empty)}</p>'
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows[:MAX_LISTED])
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    more = len(rows) - MAX_LISTED
    note = f'<p class="muted">{more:,} more not listed (the history file has them all).</p>' if more > 0 else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


def td(text: str, *, number: bool = False, raw: bool = False) -> str:
    return f"<td{' class=n' if number else ''}>{text if raw else escape(text)}</td>"
