"""One `messages.json` as a process holds it: the writer's locked handle (or a read-only view's fresh read), the
index of its records, and what opening does to a damaged or foreign file.

- The writer `flock`s the data file itself (`_locking`) and, when the file is damaged, rewrites it keeping each good
  record at its offset (the damaged original kept beside it, a warning logged).
- A history written by something else (any JSON array of pydantic-ai messages) is rewritten in our format, with
  ids; the original is kept as `messages.json.imported`.
- A read-only view takes no lock and never rewrites the file: damage is skipped (and logged).
- The index of every record is built on first need (an append, a read by ids), not by opening: `load_working()`
  reads the working context through the resume point (`_resume`) when it describes the file, else the whole
  file once. A clean file is read at the speed of its checksums (`_checked`); damage takes the full scan.
Sync: the store calls it from a worker thread, under its own lock.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from .._messages import get_message_id
from ._checked import Line, checked_records, decode_lines, read_runs, summary_of, whole_file_lines
from ._framing import FOOTER, HEADER, Record, Scan, encode, repaired, scan
from ._json_index import FileIndex
from ._locking import acquire_lock, is_json_array, write_atomically
from ._protocol import HistoryStoreError, ensure_message_id
from ._report import StoreReport, keep_damaged_copy, report_of, warn
from ._resume import ResumePoint, advance, load_from_point, read_point, resume_point_of, write_point

__all__ = ["JsonFile"]


class JsonFile:
    """The open file of a `JsonHistoryStore` and the index of its records."""

    def __init__(self, path: Path, *, read_only: bool) -> None:
        self.path = path
        self.read_only = read_only
        self.handle: BinaryIO | None = None
        self.index: FileIndex | None = None
        """Every record, once something needed it (`ensure_index`)."""
        self.loaded: list[ModelMessage] = []
        """The working context `load_working` read without indexing (its messages are known to be recorded)."""
        self._loaded_ids: frozenset[str] | None = None
        self.point: ResumePoint | None = None
        self.bytes_after_end = True
        """Bytes may follow the footer (open, failed append): the next append cuts them."""
        self.recovered_from: Path | None = None
        self.last_report: StoreReport | None = None

    # -- opening ----------------------------------------------------------------------------------------------------

    def open_for_writing(self, lock_timeout: float) -> BinaryIO:
        """Lock the file (created when missing), index it and repair it if damaged."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = acquire_lock(self.path, lock_timeout)
        except OSError as exc:
            raise HistoryStoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            if os.fstat(handle.fileno()).st_size == 0:
                handle.write(HEADER + FOOTER[1:])
                handle.flush()
            self.handle = handle
            self.index, self.point, self.loaded, self._loaded_ids = None, None, [], None
            return handle
        except BaseException as exc:
            for opened in {handle, self.handle}:
                if opened is not None:
                    opened.close()
            self.handle = None
            if isinstance(exc, OSError):
                raise HistoryStoreError(f"cannot open {self.path}: {exc}") from exc
            raise

    def open_read_only(self) -> BinaryIO:
        """Open the file as it is now (a view reads it again on every call; damage is skipped, never repaired)."""
        self.close()
        try:
            handle = self.path.open("rb")
        except FileNotFoundError as exc:
            raise HistoryStoreError(f"no history file at {self.path}") from exc
        except OSError as exc:
            raise HistoryStoreError(f"cannot read {self.path}: {exc}") from exc
        self.handle, self.index, self.loaded, self._loaded_ids = handle, None, [], None
        return handle

    def ensure_index(self) -> FileIndex:
        """The index of every record (built on first need: a clean file from its checksums and ids, anything
        else by the full scan, which repairs it for the writer)."""
        if self.index is None:
            data = self.read_all()
            lines = whole_file_lines(data)
            records = checked_records(data, lines) if lines is not None else None
            if records is None:
                self.refresh(data, repair=not self.read_only)
            else:
                self._indexed(records)
        assert self.index is not None
        return self.index

    def _indexed(self, records: list[Record]) -> None:
        """Index the records of a clean file."""
        self.last_report = report_of(self.path, Scan(records))
        warn(self.last_report)
        self.index = FileIndex.of(records)
        self.bytes_after_end = True
        self.save_point(None)

    def load_working(self) -> list[ModelMessage]:
        """The working context: from the index when built, else through the resume point, else the whole file."""
        if self.index is None:
            point = read_point(self.path)
            messages = load_from_point(self.path, point) if point is not None else None
            if messages is not None:
                self.loaded, self._loaded_ids = messages, None
                return messages
            data = self.read_all()
            lines = whole_file_lines(data)
            messages = self._decoded_whole(data, lines) if lines is not None else None
            if messages is not None:
                return messages
            self.refresh(data, repair=not self.read_only)
        return self.read_messages(self.ensure_index().working())

    def _decoded_whole(self, data: bytes, lines: list[Line]) -> list[ModelMessage] | None:
        """The working context of a clean file, every record decoded in one call (and the index built from the
        decoded ids, so nothing is parsed twice)."""
        try:
            decoded = decode_lines(data, lines)
        except ValueError:
            return None
        records: list[Record] = []
        for (offset, length, crc), message in zip(lines, decoded, strict=True):
            message_id = get_message_id(message)
            if message_id is None:
                return None
            records.append(Record(offset, length, message_id, summary_of(message), crc))
        self._indexed(records)
        by_offset = {record.offset: message for record, message in zip(records, decoded, strict=True)}
        assert self.index is not None
        return [by_offset[record.offset] for record in self.index.working()]

    def is_loaded(self, message_id: object) -> bool:
        """Whether `message_id` is one of the working context read without indexing."""
        if self._loaded_ids is None:
            self._loaded_ids = frozenset(filter(None, map(get_message_id, self.loaded)))
        return message_id in self._loaded_ids

    # -- the resume point (writer only) ------------------------------------------------------------------------

    def save_point(self, added: list[tuple[Record, Record | None]] | None) -> None:
        """Write the resume point after indexing (`added` is None) or after an append of `added`."""
        if self.read_only or self.handle is None or self.index is None:
            return
        if added is None or self.point is None:
            self.point = resume_point_of(self.index)
        else:
            self.point = advance(self.point, self.index, added)
        write_point(self.path, self.point, self.handle.fileno())

    def refresh(self, data: bytes, *, repair: bool) -> StoreReport:
        """Index `data` (the whole file); with `repair`, rewrite a damaged file keeping every good record."""
        result = scan(data)
        if not result.records and not result.header:
            if repair:
                return self._import_foreign(data)
            raise HistoryStoreError(f"{self.path} is not a messages.json written by this library")
        if repair and not result.clean and not (result.header and result.records) and is_json_array(data):
            return self._import_foreign(data)  # valid JSON in another layout (e.g. indented)
        if repair and not result.clean:
            kept = keep_damaged_copy(self.path, data)
            self.write_atomically(repaired(data, result.records))  # every good record at its offset
            self.recovered_from = kept
            report = report_of(self.path, result, kept)
            result = scan(self.read_all())
        else:
            report = report_of(self.path, result)
        warn(report)
        self.last_report = report
        self.index = FileIndex.of(result.records)
        self.bytes_after_end = True
        self.save_point(None)
        return report

    def _import_foreign(self, data: bytes) -> StoreReport:
        """A history written by something else (any JSON array of messages): rewrite it in our format, with ids."""
        try:
            messages = ModelMessagesTypeAdapter.validate_json(data)
        except ValueError as exc:
            raise HistoryStoreError(
                f"{self.path} is neither a messages.json written by this library nor a JSON array of pydantic-ai "
                f"messages ({str(exc)[:300]}); move it away to start a new history"
            ) from exc
        for message in messages:
            ensure_message_id(message)
        self.path.with_name(self.path.name + ".imported").write_bytes(data)
        body = b",\n".join(encode(m)[0] for m in messages)
        self.write_atomically(HEADER + body + (FOOTER if messages else FOOTER[1:]))
        return self.refresh(self.read_all(), repair=False)

    # -- reading and rewriting ---------------------------------------------------------------------------------------

    def read_all(self) -> bytes:
        handle = self.handle
        assert handle is not None
        handle.seek(0)
        return handle.read()

    def write_atomically(self, data: bytes) -> None:
        """Replace the file by `data`, keeping the lock (the new file, locked, becomes the handle)."""
        handle = write_atomically(self.path, data)
        if self.handle is not None:
            self.handle.close()
        self.handle = handle

    def read_messages(self, records: Sequence[Record]) -> list[ModelMessage]:
        """Decode `records` (the file is open): read in runs of neighbouring records, decoded in one call."""
        handle = self.handle
        assert handle is not None
        try:
            data, lines = read_runs(handle.fileno(), records)
            return decode_lines(data, lines)
        except (OSError, ValueError):
            return [self._read_one(record) for record in records]  # names the record that cannot be read

    def _read_one(self, record: Record) -> ModelMessage:
        assert self.handle is not None
        try:
            raw = os.pread(self.handle.fileno(), record.length, record.offset)
            return ModelMessagesTypeAdapter.validate_json(b"[" + raw + b"]")[0]
        except (OSError, ValueError) as exc:
            raise HistoryStoreError(
                f"{self.path}: the record at byte {record.offset} cannot be read as a message: {str(exc)[:300]}"
            ) from exc

    def close(self) -> None:
        """Close the handle (releasing the writer's lock), also when closing the file fails."""
        handle, self.handle = self.handle, None
        if handle is None:
            return
        try:
            handle.close()
        except OSError as exc:
            with contextlib.suppress(OSError, ValueError):
                os.close(handle.fileno())
            raise HistoryStoreError(f"closing {self.path} failed: {exc}") from exc
