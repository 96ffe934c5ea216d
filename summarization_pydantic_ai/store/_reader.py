"""Reading a history file incrementally, for consumers that follow it (the history search index).

The file's framing belongs to the store: readers go through `read_records` instead of parsing messages.json
themselves, so a change of format changes one module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from .._messages import get_message_id, is_summary_message
from ._checked import checked_lines, decode_lines
from ._framing import FOOTER, HEADER, Record, scan, scan_line

__all__ = ["RecordBatch", "StoredRecord", "read_records"]


@dataclass(frozen=True)
class StoredRecord:
    """One message record of a history file."""

    offset: int
    """Where the record starts in the file (bytes)."""
    message_id: str | None
    message: ModelMessage
    is_summary: bool
    """The record is a summary written by a compaction (a `CompactionPart` of ours)."""


@dataclass(frozen=True)
class RecordBatch:
    """The complete records found after a start offset, and where to continue next time."""

    records: list[StoredRecord] = field(default_factory=list[StoredRecord])
    next_offset: int = 0
    """Pass as `start` to the next `read_records` call: just after the last complete record."""
    first_message_id: str | None = None
    """The id of the file's first record: when it changes, the file was replaced; read it again from 0."""
    damaged: bool = False
    """Bytes that are no valid record were skipped (damage, a torn tail, a file not written by this library)."""


def read_records(path: str | os.PathLike[str], start: int = 0) -> RecordBatch:
    """The records written to the history file at `path` after byte `start` (0: all of them).

    A record still being written (an append in progress, or a torn tail: its checksum does not hold yet) is not
    returned: `next_offset` stops
    before it. A damaged record (its checksum does not hold) is skipped; the records after it are returned. A
    record with the id of an earlier one is a newer version of that message (an edit). A missing file reads as
    empty. Sync: call it from a worker thread.
    """
    file = Path(path)
    try:
        with file.open("rb") as handle:
            first_line = handle.readline() and handle.readline()
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return RecordBatch()
    first_id = _first_id(first_line)
    checked = _checked_batch(data, start)
    if checked is not None:
        return RecordBatch(checked[0], checked[1], first_id)
    result = scan(data, start)
    end = start if start else (len(HEADER) if result.header else 0)
    records: list[StoredRecord] = []
    for record in result.records:
        try:
            raw = data[record.offset - start : record.offset - start + record.length]
            message = ModelMessagesTypeAdapter.validate_json(b"[" + raw + b"]")[0]
        except ValueError:
            continue  # a record that is JSON but no message: skipped like a damaged one
        records.append(StoredRecord(record.offset, get_message_id(message), message, is_summary_message(message)))
        end = record.offset + record.length
    return RecordBatch(records, end, first_id, damaged=not result.clean)


def _checked_batch(data: bytes, start: int) -> tuple[list[StoredRecord], int] | None:
    """The records of `data` (the file from `start`) and where they end, when it is whole (our footer at the end)
    and every record's checksum holds: decoded in one call. `None` for anything else (the full scan decides)."""
    if not data.endswith(FOOTER):
        return None  # an append in progress, a torn tail, damage: the scan finds what is complete
    stop = len(data) - len(FOOTER)
    if start == 0 and data.startswith(HEADER):
        begin = len(HEADER)
    elif start and data.startswith(b",\n"):
        begin = 2
    else:
        return ([], start) if start and stop == 0 else None  # nothing new after `start`
    if stop < begin:
        return [], len(HEADER)  # an empty history
    lines = checked_lines(data, begin, stop, base=start)
    if lines is None:
        return None
    try:
        messages = decode_lines(data, lines, base=start)
    except ValueError:
        return None
    records = [
        StoredRecord(offset, get_message_id(m), m, is_summary_message(m))
        for (offset, _, _), m in zip(lines, messages, strict=True)
    ]
    return records, lines[-1][0] + lines[-1][1]


_FIRST_IDS: dict[bytes, str | None] = {}
"""First lines already parsed -> their record's id: a follower (the history search) reads the same first line on
every update; the same bytes are the same record, checksum included, so it is parsed once."""
_FIRST_IDS_MAX = 16
_FIRST_LINE_CACHED_MAX = 65_536


def _first_id(line: bytes) -> str | None:
    if line in _FIRST_IDS:
        return _FIRST_IDS.get(line)
    first_id = next(
        (item.message_id if isinstance(item, Record) else None for item in scan_line(line.rstrip(b"\n"), 0)), None
    )
    if len(line) <= _FIRST_LINE_CACHED_MAX:
        if len(_FIRST_IDS) >= _FIRST_IDS_MAX:
            _FIRST_IDS.clear()  # atomic (worker threads read files concurrently); refilled on the next reads
        _FIRST_IDS[line] = first_id
    return first_id
