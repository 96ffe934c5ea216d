"""Reading a clean `messages.json` at the speed of the checksum: records found without parsing their JSON.

A file (or a span of it) written by this library and never damaged is a run of lines, each one record whose CRC-32
holds. These functions check each line's checksum (C speed) and find what the store needs of a record without
`json.loads`: its message id from the bytes, its summary provenance by parsing only the records that hold a
compaction part. Anything else (damage, format 1, a foreign layout) returns `None`: the caller falls back to the
full `scan` of `_framing`, which finds, reports and repairs damage.
"""

from __future__ import annotations

import gc
import json
import os
import re
import zlib
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import CompactionPart, ModelMessage, ModelMessagesTypeAdapter

from .._messages import MESSAGE_ID_KEY, SUMMARY_METADATA_KEY
from ._framing import FOOTER, HEADER, Record, clean_summary, record_info

__all__ = [
    "COMPACTION",
    "Line",
    "checked_lines",
    "checked_records",
    "decode_lines",
    "read_runs",
    "summary_of",
    "whole_file_lines",
]

Line = tuple[int, int, int]
"""(offset, length, crc) of one record: its bytes without the separator, the checksum of its content."""

_CRC_KEY = b',"crc32":"'
_SUFFIX = len(_CRC_KEY) + 8 + 2  # ,"crc32":"xxxxxxxx"}
_ID_KEY = json.dumps(MESSAGE_ID_KEY).encode() + b':"'
_ID_VALUE = re.compile(rb'[^"\\]*')
COMPACTION = b'"part_kind":"compaction"'
"""In every record that holds a compaction part (and, rarely, in others: tool arguments can spell it)."""


def checked_lines(data: bytes | bytearray, start: int, end: int, *, base: int = 0) -> list[Line] | None:
    """Every record of `data[start:end]` (whole lines, records separated by `,\\n`), or `None` unless each line
    is one record whose checksum holds. Offsets are `base +` positions in `data`."""
    view = memoryview(data)
    lines: list[Line] = []
    position = start
    crc32, find = zlib.crc32, data.find
    while position < end:
        newline = find(b"\n", position, end)
        stop = end if newline < 0 else newline
        body_end = stop - 1 if newline >= 0 else stop  # a line before another one ends with the separator
        if newline >= 0 and data[body_end] != 0x2C:  # ","
            return None
        suffix = body_end - _SUFFIX
        if suffix <= position or data[suffix : suffix + 10] != _CRC_KEY or data[body_end - 2 : body_end] != b'"}':
            return None
        crc = crc32(view[position:suffix])
        if b"%08x" % crc != data[suffix + 10 : suffix + 18]:
            return None
        lines.append((base + position, body_end - position, crc))
        position = stop + 1
    return lines


def whole_file_lines(data: bytes) -> list[Line] | None:
    """The records of a whole clean file (our header, records, our footer), or `None`."""
    if not data.startswith(HEADER) or not data.endswith(FOOTER[1:]):
        return None
    if len(data) == len(HEADER) + len(FOOTER) - 1:
        return []
    if not data.endswith(FOOTER):
        return None
    return checked_lines(data, len(HEADER), len(data) - len(FOOTER))


def checked_records(data: bytes, lines: Sequence[Line], *, base: int = 0) -> list[Record] | None:
    """The index entries of checked `lines` (offsets are `base +` positions in `data`): the message id read
    from the bytes where it occurs once, the summary provenance parsed from records with a compaction part."""
    records: list[Record] = []
    for offset, length, crc in lines:
        start = offset - base
        stop = start + length
        key = data.rfind(_ID_KEY, start, stop)
        if key < 0:
            return None
        message_id: str | None = None
        summary: dict[str, Any] | None = None
        if data.find(COMPACTION, start, stop) >= 0 or data.find(_ID_KEY, start, key) >= 0:
            info = record_info(json.loads(data[start:stop]))
            if info is None:
                return None
            message_id, summary = info
        else:
            value = _ID_VALUE.match(data, key + len(_ID_KEY), stop)
            if value is None or data[value.end() : value.end() + 1] != b'"':
                return None
            message_id = value.group().decode()
        records.append(Record(offset, length, message_id, summary, crc))
    return records


def decode_lines(data: bytes | bytearray, lines: Sequence[Line], *, base: int = 0) -> list[ModelMessage]:
    """Decode the records at `lines` (offsets are `base +` positions in `data`) in one `validate_json` call.
    A contiguous run is decoded as it lies in `data` (separators included): `data` itself, not a copy, when it
    is exactly that run between `[` and our footer (a whole clean file). Raises `ValueError` when any record is
    not a message."""
    if not lines:
        return []
    start, stop = lines[0][0] - base, lines[-1][0] - base + lines[-1][1]
    contiguous = all(
        following[0] == offset + length + 2
        for (offset, length, _), following in zip(lines, lines[1:], strict=False)  # noqa: RUF007
    )
    if contiguous and start <= len(HEADER) and data[:start].rstrip() == b"[" and data[stop:] == FOOTER:
        return _decoded(data, len(lines))
    if contiguous:
        body = bytearray(b"[")
        body += memoryview(data)[start:stop]
    else:
        body = bytearray(b"[")
        body += b",".join(data[offset - base : offset - base + length] for offset, length, _ in lines)
    body += b"]"
    return _decoded(body, len(lines))


_BATCH_WITHOUT_GC = 256
"""From this many records, the cyclic garbage collector waits until the batch is decoded."""


def _decoded(array: bytes | bytearray, records: int) -> list[ModelMessage]:
    """`validate_json` of a JSON array of records. Decoding creates a great many objects and no reference cycles,
    so for a large batch the cyclic collector is held off until it is done: its passes over the growing heap
    (a quarter of the time of a long history's decode) find nothing to free."""
    if records < _BATCH_WITHOUT_GC or not gc.isenabled():
        return ModelMessagesTypeAdapter.validate_json(array)
    gc.disable()
    try:
        return ModelMessagesTypeAdapter.validate_json(array)
    finally:
        gc.enable()


def summary_of(message: ModelMessage) -> dict[str, Any] | None:
    """The summary provenance of a decoded record, as `record_info` reads it from the record's JSON."""
    summary: dict[str, Any] | None = None
    for part in message.parts:
        metadata = part.metadata if isinstance(part, CompactionPart) else None
        info = metadata.get(SUMMARY_METADATA_KEY) if isinstance(metadata, dict) else None
        if isinstance(info, dict):
            summary = clean_summary(info)  # pyright: ignore[reportUnknownArgumentType]
    return summary


_GAP = 1 << 16
"""Records closer than this are read in one run (reading the bytes between costs less than another call)."""


def read_runs(fd: int, records: Sequence[Record]) -> tuple[bytes, list[Line]]:
    """The bytes of `records` read in runs of neighbouring records (one `pread` per run), as one buffer for
    `decode_lines`: the file's bytes themselves when the records are one contiguous run in file order."""
    if not records:
        return b"", []
    starts = [r.offset for r in records]
    ordered = all(a < b for a, b in zip(starts, starts[1:], strict=False))  # noqa: RUF007
    runs: list[list[int]] = []
    for record in records if ordered else sorted(records, key=lambda r: r.offset):
        if runs and runs[-1][0] <= record.offset <= runs[-1][1] + _GAP:
            runs[-1][1] = max(runs[-1][1], record.offset + record.length)
        else:
            runs.append([record.offset, record.offset + record.length])
    chunks = [(start, _pread(fd, end - start, start)) for start, end in runs]
    if len(chunks) == 1 and ordered:
        base, data = chunks[0]
        return data, [(r.offset - base, r.length, r.crc) for r in records]
    run_starts = [start for start, _ in chunks]
    pieces: list[bytes] = []
    lines: list[Line] = []
    position = 0
    for record in records:
        start, data = chunks[bisect_right(run_starts, record.offset) - 1]
        pieces.append(data[record.offset - start : record.offset - start + record.length])
        lines.append((position, record.length, record.crc))
        position += record.length + 2
    return b",\n".join(pieces), lines


def _pread(fd: int, length: int, offset: int) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise OSError(f"the file ends before byte {offset + length}")
    return data
