"""Shared pieces of the structure-aware previews: number formatting, clipping, line splitting and the
budgeted assembler that keeps every preview within `max_chars`.

Line numbers in previews are 1-based and count `\\n`-separated lines (a trailing `\\r` is dropped from each
line), so `12| ...` in a preview is line 12 of the saved file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ELLIPSIS",
    "MAX_LINE_CHARS",
    "Section",
    "assemble",
    "clip",
    "fmt_int",
    "head_lines",
    "number_lines",
    "plural",
    "split_lines",
    "wrap",
]

ELLIPSIS = "…"
MAX_LINE_CHARS = 240
"""No single preview line is longer than this (a minified 300 KB line would otherwise eat the whole budget)."""


def fmt_int(n: int) -> str:
    """`300512` -> `'300,512'`."""
    return f"{n:,}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """`plural(1, 'key')` -> `'1 key'`, `plural(12, 'key')` -> `'12 keys'`."""
    return f"{fmt_int(n)} {word if n == 1 else (many or word + 's')}"


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending in `…` when cut."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + ELLIPSIS


def split_lines(content: str) -> list[str]:
    """The lines of `content`, split on `\\n` only; a trailing newline does not add an empty last line."""
    lines = content.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def head_lines(content: str, n: int, max_scan: int = 65_536) -> list[str]:
    """Up to the first `n` lines, looking at no more than `max_scan` characters (a partial last line is dropped
    when the scan was cut short, unless it is the only line)."""
    chunk = content[:max_scan]
    lines = chunk.split("\n", n)
    if len(lines) > n:
        lines = lines[:n]  # the first n lines are all complete
    elif len(chunk) < len(content) and len(lines) > 1:
        lines.pop()  # the scan stopped inside the last line
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def number_lines(numbered: Sequence[tuple[int, str]], width: int | None = None) -> list[str]:
    """`[(12, 'x')]` -> `['12| x']`, right-aligned to the widest number, each line clipped."""
    if not numbered:
        return []
    w = width or len(str(max(n for n, _ in numbered)))
    return [clip(f"{n:>{w}}| {text}", MAX_LINE_CHARS) for n, text in numbered]


def wrap(parts: Sequence[str], width: int = 110, indent: str = "  ") -> list[str]:
    """Comma-separated `parts` wrapped into indented lines of about `width` characters."""
    lines: list[str] = []
    current = ""
    for part in parts:
        if current and len(current) + 2 + len(part) > width:
            lines.append(indent + current + ",")
            current = part
        else:
            current = f"{current}, {part}" if current else part
    if current:
        lines.append(indent + current)
    return lines


@dataclass(slots=True)
class Section:
    """A block of preview lines that can shrink to fit: `keep` says which end survives (`head`: the first
    lines, `tail`: the last ones, `ends`: both ends with the middle elided). `title` is kept whenever any
    line is, `floor` is the smallest share of the budget this section gets when the preview is tight, and
    `max_line` the length each line is clipped to."""

    lines: list[str]
    keep: Literal["head", "tail", "ends"] = "head"
    title: str | None = None
    floor: int = 0
    max_line: int = MAX_LINE_CHARS


def _size(lines: Sequence[str]) -> int:
    """Characters `lines` take when joined with newlines (counting the newline before each one)."""
    return sum(len(line) + 1 for line in lines)


def _fit_section(section: Section, budget: int) -> list[str]:
    """The section's lines within `budget` characters (newlines included), with an elision marker."""
    title = [clip(section.title, MAX_LINE_CHARS)] if section.title else []
    lines = [clip(line, section.max_line) for line in section.lines]
    if _size(title) + _size(lines) <= budget:
        return title + lines
    budget -= _size(title)
    if budget <= 0:
        return []
    total = len(lines)

    def marker(dropped: int) -> str:
        return f"  {ELLIPSIS} {plural(dropped, 'more line')}"

    kept_head: list[str] = []
    kept_tail: list[str] = []
    used = len(marker(total)) + 1
    order: list[tuple[str, int]]
    if section.keep == "head":
        order = [("h", i) for i in range(total)]
    elif section.keep == "tail":
        order = [("t", i) for i in range(total - 1, -1, -1)]
    else:  # alternate from both ends
        order = []
        lo, hi = 0, total - 1
        while lo <= hi:
            order.append(("h", lo))
            if lo != hi:
                order.append(("t", hi))
            lo, hi = lo + 1, hi - 1
    for end, i in order:
        cost = len(lines[i]) + 1
        if used + cost > budget:
            # a line that does not fit whole may still fit clipped when nothing is kept yet
            room = budget - used - 1
            if not kept_head and not kept_tail and room >= 20:
                (kept_head if end == "h" else kept_tail).append(clip(lines[i], room))
            break
        used += cost
        (kept_head if end == "h" else kept_tail).append(lines[i])
    kept_tail.reverse()
    dropped = total - len(kept_head) - len(kept_tail)
    if not kept_head and not kept_tail and used > budget:
        return []
    middle = [marker(dropped)] if dropped else []
    return title + kept_head + middle + kept_tail


def assemble(header: str, fixed: Sequence[str], sections: Sequence[Section], max_chars: int) -> str:
    """Join a preview: the one-line `header`, then the `fixed` lines (summary facts, dropped from the end when
    there is no room), then the `sections`, which share what is left (each gets what it needs when everything
    fits; otherwise the budget is split evenly and what a small section leaves goes to the bigger ones).
    The result is never longer than `max_chars`."""
    if max_chars <= 0:
        return ""
    out = [clip(header.replace("\n", " "), min(max_chars, MAX_LINE_CHARS * 2))]
    used = len(out[0])
    for fact in fixed:
        line = clip(fact, MAX_LINE_CHARS)
        if used + 1 + len(line) > max_chars:
            break
        out.append(line)
        used += 1 + len(line)
    remaining = max_chars - used
    live = [s for s in sections if s.lines]
    if live and remaining > 0:
        needs = [_size(_fit_section(s, 1 << 60)) for s in live]
        budgets = [0] * len(live)
        if sum(needs) <= remaining:
            budgets = needs
        else:
            floors = [min(s.floor, need) for s, need in zip(live, needs, strict=True)]
            if sum(floors) > remaining:
                floors = [0] * len(live)
            budgets = list(floors)
            left = remaining - sum(floors)
            pending = sorted(range(len(live)), key=lambda i: needs[i] - floors[i])
            while pending:
                share = left // len(pending)
                i = pending.pop(0)
                give = min(needs[i] - floors[i], share)
                budgets[i] += give
                left -= give
        for section, budget in zip(live, budgets, strict=True):
            lines = _fit_section(section, budget)
            out.extend(lines)
            used += _size(lines)
    text = "\n".join(out)
    return text if len(text) <= max_chars else clip(text, max_chars)
