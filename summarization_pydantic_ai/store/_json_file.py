"""One `messages.json` as a process holds it: the writer's locked handle (or a read-only view's fresh read), the
index of its records, and what opening does to a damaged or foreign file.

- The writer `flock`s the data file itself (`_locking`) and, when the file is damaged, rewrites it keeping each good
  record at its offset (the damaged original kept beside it, a warning logged).
- A history written by something else (any JSON array of pydantic-ai messages) is rewritten in our format, with
  ids; the original is kept as `messages.json.imported`.
- A read-only view takes no lock and never rewrites the file: damage is skipped (and logged).
Sync: the store calls it from a worker thread, under its own lock.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from ._framing import FOOTER, HEADER, Record, encode, repaired, scan
from ._json_index import FileIndex
from ._locking import acquire_lock, is_json_array, write_atomically
from ._protocol import HistoryStoreError, ensure_message_id
from ._report import StoreReport, keep_damaged_copy, report_of, warn

__all__ = ["JsonFile"]


class JsonFile:
    """The open file of a `JsonHistoryStore` and the index of its records."""

    def __init__(self, path: Path, *, read_only: bool) -> None:
        self.path = path
        self.read_only = read_only
        self.handle: BinaryIO | None = None
        self.index = FileIndex()
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
            handle.seek(0)
            self.handle = handle
            self.refresh(handle.read(), repair=True)
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
        """(Re)scan the file as it is now; damage is skipped (and logged), never repaired."""
        self.close()
        try:
            handle = self.path.open("rb")
        except FileNotFoundError as exc:
            raise HistoryStoreError(f"no history file at {self.path}") from exc
        except OSError as exc:
            raise HistoryStoreError(f"cannot read {self.path}: {exc}") from exc
        self.handle = handle
        self.refresh(handle.read(), repair=False)
        return handle

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
        """Decode `records` (the file is open)."""
        handle = self.handle
        assert handle is not None
        messages: list[ModelMessage] = []
        for record in records:
            try:
                handle.seek(record.offset)
                raw = handle.read(record.length)
                messages.append(ModelMessagesTypeAdapter.validate_json(b"[" + raw + b"]")[0])
            except (OSError, ValueError) as exc:
                raise HistoryStoreError(
                    f"{self.path}: the record at byte {record.offset} cannot be read as a message: {str(exc)[:300]}"
                ) from exc
        return messages

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
