"""The simulated provider cache: entries keyed by the chained fingerprint of a prefix, each alive until its
TTL passes after its last use.

A read refreshes every entry of the prefix it read (the provider refreshes the cached prefix on each use). To
do that in O(1) rather than O(prefix), entries belong to *lines*: a line is a run of positions written one
after the other (a conversation growing), and a rewrite starts a new line branching off its parent at the
position it diverged. Each line keeps its refreshes as a stack of `(time, up_to)`: an entry's last use is the
newest refresh reaching its position. A read walks up the lines of its prefix: one line per rewrite it
passes, not one step per message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

__all__ = ["CacheEntries", "Entry", "Line"]


@dataclass(eq=False)
class Line:
    parent: Line | None
    branch: int
    """The first position of this line; earlier ones belong to `parent`."""
    tip: int = -1
    """The last position written on this line."""
    _times: list[float] = field(default_factory=list[float])
    _reach: list[int] = field(default_factory=list[int])
    """Refreshes, oldest first: `_times` ascending, `_reach` (the last position each refreshed) descending."""

    def refresh(self, now: float, up_to: int) -> None:
        times, reach = self._times, self._reach
        while reach and reach[-1] <= up_to:  # an older refresh reaching no further is superseded
            reach.pop()
            times.pop()
        times.append(now)
        reach.append(up_to)

    def last_use(self, position: int) -> float | None:
        """The newest refresh reaching `position` (`None` if none does)."""
        reach = self._reach
        # `reach` descends, so the refreshes reaching `position` are a prefix of it and the newest is its last.
        low, high = 0, len(reach)
        while low < high:
            middle = (low + high) // 2
            if reach[middle] >= position:
                low = middle + 1
            else:
                high = middle
        return self._times[low - 1] if low else None

    def holding(self, position: int) -> Line:
        """The line (this one or an ancestor) that `position` belongs to."""
        line = self
        while line.branch > position and line.parent is not None:
            line = line.parent
        return line


@dataclass(eq=False, slots=True)
class Entry:
    tokens: int
    line: Line
    position: int
    ttl: float | None
    """Seconds the entry lives after its last use; `None`: forever."""


@dataclass
class CacheEntries:
    """Entries by chained prefix fingerprint."""

    entries: dict[bytes, Entry] = field(default_factory=dict[bytes, Entry])

    def alive(self, key: bytes, now: float) -> Entry | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        if entry.ttl is not None:
            last = entry.line.last_use(entry.position)
            if last is None or now - last > entry.ttl:
                return None
        return entry

    def refresh(self, entry: Entry, now: float) -> None:
        """A read of the prefix up to `entry`: every line it passes through is refreshed up to it."""
        line: Line | None = entry.line
        up_to = entry.position
        while line is not None:
            line.refresh(now, up_to)
            up_to = line.branch - 1
            line = line.parent

    def line_after(self, read: Entry | None) -> Line:
        """The line new entries after `read` go on: `read`'s own when it is that line's tip (the conversation
        grew), else a new branch."""
        if read is not None and read.position == read.line.tip:
            return read.line
        return Line(read.line if read else None, (read.position + 1) if read else 0)

    def prune(self, now: float) -> None:
        """Forget the entries no longer alive (the provider has dropped them): a long session with many rewrites
        would otherwise keep every branch it ever wrote."""
        dead = [key for key in self.entries if self.alive(key, now) is None]
        for key in dead:
            del self.entries[key]

    def write(self, key: bytes, tokens: int, line: Line, position: int, ttl: timedelta | None) -> None:
        """An entry for the prefix up to `position` (refresh `line` once the request's writes are done)."""
        seconds = ttl.total_seconds() if ttl is not None else None
        self.entries[key] = Entry(tokens, line, position, seconds)
        line.tip = max(line.tip, position)
