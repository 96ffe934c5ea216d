"""The in-memory index of a `messages.json`: where the latest record of each message lies, by first recording."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ._framing import HEADER, Record
from ._working import working_records

__all__ = ["FileIndex"]


@dataclass
class FileIndex:
    """One slot per message: its latest version, at the place of its first one (`positions`: id -> slot)."""

    slots: list[Record] = field(default_factory=list[Record])
    positions: dict[str, int] = field(default_factory=dict[str, int])
    firsts: list[int] = field(default_factory=list[int])
    """The offset of each slot's first record (where the message was first recorded): its slot key."""
    versions: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    """(offset, slot key) of every record that is a newer version of an earlier message."""
    records_in_file: int = 0
    """Every record, versions included."""
    end: int = len(HEADER)
    """Where the footer starts: just after the last record."""

    @classmethod
    def of(cls, records: Iterable[Record]) -> FileIndex:
        index = cls()
        for record in records:
            index.add(record)
        return index

    def add(self, record: Record) -> Record | None:
        """Index a record that lies after every indexed one (a new message, or a newer version of one); returns
        the version it replaces (`None` for a new message)."""
        position = self.positions.get(record.message_id)
        previous: Record | None = None
        if position is None:
            self.positions[record.message_id] = len(self.slots)
            self.slots.append(record)
            self.firsts.append(record.offset)
        else:
            previous, self.slots[position] = self.slots[position], record  # in the place of the first one
            self.versions.append((record.offset, self.firsts[position]))
        self.records_in_file += 1
        self.end = record.offset + record.length
        return previous

    def working(self) -> list[Record]:
        """The records `load()` returns: the latest summary, what it kept, and what followed."""
        return working_records(self.slots, self.positions)
