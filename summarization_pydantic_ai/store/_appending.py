"""Appending to a `messages.json`: which messages need a new record, where the new records go, and writing them.

- A message gets a record when it is new, or when its content changed (another checksum): a new version.
- The new records go after the last one, over the closing `\n]\n`, which is written again after them: the cost of
  an append is that of its new messages.
- A write that fails puts the footer back after the last acknowledged record: the file stays a valid JSON array.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pydantic_ai.messages import ModelMessage

from .._messages import get_message_id, summary_info
from ._framing import FOOTER, Record, clean_summary, encode
from ._protocol import HistoryStoreError

__all__ = ["NewRecord", "new_records", "place", "write_tail"]


@dataclass(frozen=True)
class NewRecord:
    """A record to append: the message, its id, its encoding and the encoding's checksum."""

    message_id: str
    raw: bytes
    crc: int
    message: ModelMessage

    def at(self, offset: int) -> Record:
        """The index entry of this record written at `offset`."""
        info = summary_info(self.message)
        return Record(offset, len(self.raw), self.message_id, clean_summary(info) if info else None, self.crc, True)


def new_records(
    messages: Sequence[ModelMessage],
    slots: Sequence[Record],
    positions: Mapping[str, int],
    *,
    read: Callable[[Record], ModelMessage],
    where: Path,
) -> list[NewRecord]:
    """The records `messages` need: one for each new message, and a new version of each recorded message whose
    content changed. `slots[positions[id]]` is the latest record of each recorded message; `read` decodes one."""
    new: list[NewRecord] = []
    batch: dict[str, int] = {}  # the checksum of each message's last version in this append
    for message in messages:
        message_id = get_message_id(message)
        if message_id is None:
            raise HistoryStoreError("every recorded message needs an id: call ensure_message_id first")
        try:
            raw, crc = encode(message)
        except (ValueError, TypeError) as exc:
            raise HistoryStoreError(f"message {message_id!r} cannot be recorded in {where}: {str(exc)[:300]}") from exc
        position = positions.get(message_id)
        if message_id in batch:
            unchanged = batch[message_id] == crc
        else:
            unchanged = position is not None and _holds(slots[position], crc, read)
        if unchanged:
            continue  # recorded already, unchanged
        batch[message_id] = crc
        new.append(NewRecord(message_id, raw, crc, message))
    return new


def _holds(record: Record, crc: int, read: Callable[[Record], ModelMessage]) -> bool:
    """Whether `record` holds the message whose encoding has checksum `crc`. Files written by an older version,
    or format 1, may encode the same message differently: a record whose checksum differs is encoded again as
    this process does (once: the result is cached on the record)."""
    if record.crc != crc and not record.current:
        record.current = True
        with contextlib.suppress(HistoryStoreError, ValueError, TypeError):  # unreadable: write the new one
            record.crc = encode(read(record))[1]
    return record.crc == crc


def place(new: Sequence[NewRecord], end: int, *, after_records: bool) -> tuple[bytes, list[Record]]:
    """Lay `new` out from byte `end` (where the footer starts), after a separator when `after_records` (the file
    holds records already) or after a previous new record: the bytes to write, and the index entries."""
    chunk = bytearray()
    records: list[Record] = []
    for record in new:
        if after_records or records:
            chunk += b",\n"
        records.append(record.at(end + len(chunk)))
        chunk += record.raw
    return bytes(chunk), records


def write_tail(handle: BinaryIO, end: int, chunk: bytes, *, cut: bool, fsync: bool, where: Path) -> None:
    """Write `chunk` and the footer over the footer at byte `end`; `cut`: bytes may follow the footer (a failed
    append, or what opening found), so the file is truncated after the new one."""
    try:
        handle.seek(end)
        _write(handle, chunk + FOOTER)
        if cut:
            handle.truncate()
        if fsync:
            os.fsync(handle.fileno())
    except OSError as exc:
        # Put the footer back after the last acknowledged record (the file stays a valid array); if even
        # that fails, the next open finds a torn tail and loses only the records of this append.
        with contextlib.suppress(OSError):
            handle.seek(end)
            handle.write(FOOTER)
            handle.flush()
            handle.truncate()
        raise HistoryStoreError(
            f"appending to {where} at byte {end} failed ({exc}); the records before it are intact"
        ) from exc


def _write(handle: BinaryIO, data: bytes) -> None:
    # One function for the write itself, so that fault-injection tests can make it fail half-way.
    handle.write(data)
    handle.flush()
