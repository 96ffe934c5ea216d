"""The deterministic summary's sections: entries in time order, an earlier summary read back, the budget.

A section is a list of one-line entries, oldest first. When the summary is too long, each section keeps its newest
entries within a share of the budget; what a section leaves unused goes to the others, in priority order. A cut
section says how many older entries it left out (they are in the archive, by message id).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["ESSENTIAL_PREFIX", "Section", "fit_sections", "read_previous"]


@dataclass
class Section:
    title: str
    entries: list[str] = field(default_factory=list[str])
    share: float = 0.0
    """Its share of the room the sections have (the shares of all sections add up to 1)."""
    bare: Callable[[str], tuple[str, bool] | None] | None = None
    """The short form an entry it leaves out keeps (e.g. a file's path) and whether that form is essential (a
    file changed: always listed); the others are listed as room allows. Without it, the section says how many
    entries it left out."""
    keyed: dict[str, int] = field(default_factory=dict[str, int])
    """Entry keys (normalized text, or a path) -> index, for deduplication."""

    def add(self, entry: str, key: str | None = None) -> None:
        """Add `entry` as the newest; an entry with the same key (by default: the same words) replaces it."""
        key = key if key is not None else " ".join(entry.lower().split())
        old = self.keyed.pop(key, None)
        if old is not None:
            self.entries[old] = ""
        self.keyed[key] = len(self.entries)
        self.entries.append(entry)


_ALSO = "also: "
ESSENTIAL_PREFIX = "also changed: "
_BARE_ROOM = 0.4
"""The part of its room a section with short forms gives them, once its whole entries no longer all fit."""


class _Fitting:
    """One section's entries, and how many of the newest fit in a given room (the line naming the others
    included), in O(entries)."""

    def __init__(self, section: Section) -> None:
        self.section = section
        self.entries = [e for e in section.entries if e]
        self.newest_cost = [0]
        for entry in reversed(self.entries):
            self.newest_cost.append(self.newest_cost[-1] + len(entry) + 3)
        self.bares = [section.bare(e) for e in self.entries] if section.bare is not None else []

    def _count_line(self, omitted: int) -> str:
        return f"({omitted} earlier entr{'y' if omitted == 1 else 'ies'} left out)" if omitted else ""

    def _bare_line(self, omitted: int, room: int) -> str:
        """The short forms of the `omitted` oldest entries: every essential one, then the others, newest first, as
        many as fit in `room`."""
        forms = [b for b in self.bares[:omitted] if b is not None]
        essential = [form for form, needed in forms if needed]
        line = ESSENTIAL_PREFIX + ", ".join(essential) if essential else ""
        others = [form for form, needed in forms if not needed]
        shown: list[str] = []
        used = len(line) + len(_ALSO) + 5 + 24  # the separator, and "(and N more)"
        for form in reversed(others):
            if used + len(form) + 2 > room:
                break
            shown.append(form)
            used += len(form) + 2
        if shown:
            more = f" (and {len(others) - len(shown)} more)" if len(others) > len(shown) else ""
            line += ("; " if line else "") + _ALSO + ", ".join(reversed(shown)) + more
        elif others:
            line += ("; " if line else "") + f"({len(others)} more left out)"
        return line or self._count_line(omitted)

    def take(self, room: int) -> tuple[int, str]:
        """How many of the newest entries fit in `room`, and the line that names the others."""
        total = len(self.entries)
        if self.newest_cost[total] <= room:
            return total, ""
        whole = room if self.section.bare is None else int(room * (1 - _BARE_ROOM))
        kept = 0
        while kept < total and self.newest_cost[kept + 1] <= whole:
            kept += 1
        while True:
            left = room - self.newest_cost[kept]
            line = self._count_line(total - kept) if self.section.bare is None else self._bare_line(total - kept, left)
            if not kept or self.newest_cost[kept] + len(line) + 3 <= room:
                return kept, line
            kept -= 1

    def cost(self, taken: tuple[int, str]) -> int:
        kept, line = taken
        return self.newest_cost[kept] + (len(line) + 3 if line else 0)

    def render(self, taken: tuple[int, str]) -> str:
        kept, line = taken
        lines = [f"- {e}" for e in ([line] if line else []) + self.entries[len(self.entries) - kept :]]
        return f"## {self.section.title}\n" + ("\n".join(lines) if lines else "none")


def fit_sections(sections: Sequence[Section], room: int) -> list[str]:
    """Each section rendered, within `room` characters in all (headings included), newest entries kept first.
    What a section's share leaves unused goes to the others in the order given. The essential short forms are
    never left out: when they exceed their section's share, the other sections make room."""
    fittings = [_Fitting(s) for s in sections]
    overhead = sum(len(s.title) + 8 for s in sections)
    if sum(f.newest_cost[-1] for f in fittings) + overhead <= room:
        return [f.render((len(f.entries), "")) for f in fittings]
    target = room
    rendered = [f.render(t) for f, t in zip(fittings, _fit(fittings, target - overhead), strict=True)]
    for _ in range(5):
        excess = sum(len(r) + 2 for r in rendered) - room
        if excess <= 0:
            break
        target -= excess + 100  # entries are whole lines: a step of a few characters may change nothing
        rendered = [f.render(t) for f, t in zip(fittings, _fit(fittings, target - overhead), strict=True)]
    return rendered


def _fit(fittings: Sequence[_Fitting], room: int) -> list[tuple[int, str]]:
    available = max(room, 0)
    taken = [f.take(int(available * f.section.share)) for f in fittings]
    spare = available - sum(f.cost(t) for f, t in zip(fittings, taken, strict=True))
    for i, fitting in enumerate(fittings):
        if spare <= 0:
            break
        if taken[i][0] < len(fitting.entries):
            before = fitting.cost(taken[i])
            taken[i] = fitting.take(before + spare)
            spare -= fitting.cost(taken[i]) - before
    return taken


_HEADING = re.compile(r"^#{1,6}\s*(.+?)\s*:?\s*$", re.MULTILINE)
_OMITTED = re.compile(r"^\(\d+ earlier entr(?:y|ies) left out\)$")


def read_previous(summary: str) -> tuple[dict[str, list[str]], str]:
    """An earlier summary's sections as entries (`- ` lines; other lines of a section are one entry), keyed by
    lower-cased title, and the text before its first heading."""
    parts = _HEADING.split(summary)
    preamble, found = parts[0].strip(), dict[str, list[str]]()
    for title, body in zip(parts[1::2], parts[2::2], strict=False):
        items: list[str] = []
        loose: list[str] = []
        for line in body.strip().splitlines():
            stripped = line.strip()
            if stripped.startswith("- "):
                entry = stripped[2:].strip()
                if not _OMITTED.match(entry):
                    items.append(entry)
            elif stripped and stripped.lower() != "none":
                loose.append(stripped)
        if loose:
            items.insert(0, " ".join(loose))
        found.setdefault(title.strip().lower(), []).extend(items)
    return found, preamble
