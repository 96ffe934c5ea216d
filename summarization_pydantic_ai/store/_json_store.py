"""The default history store: `messages.json`, an append-only JSON array, one checksummed record per line.

- It always is a JSON array that `ModelMessagesTypeAdapter.validate_json` loads; the framing is in `_framing`.
- An append (`_appending`) writes only the new records, over the closing `\n]\n`: its cost is that of the new messages.
- A message appended again with new content is a new version; reads return the latest at the first's place.
- Damage anywhere loses only the damaged records; opening for writing repairs the file (each good record at its
  offset, the damaged original kept beside it) and logs a warning; `verify()` reports, `repair()` repairs.
- The writer `flock`s the data file itself (`_locking`): deleting a file cannot let a second writer in.
- File I/O runs in a worker thread; the event loop never waits on the disk.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import anyio.to_thread
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from ._appending import new_records, place, write_tail
from ._database import SearchHit
from ._framing import FOOTER, HEADER, Record, encode, repaired, scan
from ._json_search import load_search_texts, load_versions, save_search_text
from ._locking import acquire_lock, is_json_array, write_atomically
from ._paging import check_page, page_of
from ._protocol import HistoryPage, HistoryStoreError, ensure_message_id
from ._report import StoreReport, keep_damaged_copy, report_of, warn
from ._scan_search import SearchFilter, scan_search
from ._working import working_records

__all__ = ["JsonHistoryStore"]


class JsonHistoryStore:
    """The `messages.json` history store. Use [`open`][summarization_pydantic_ai.JsonHistoryStore.open] to share
    one instance per file within a process.

    Example:
        ```python
        store = JsonHistoryStore.open('.sessions/abc/messages.json')
        await store.append(messages)  # each message needs an id: see ensure_message_id
        history = await store.load()  # the working context, to pass as message_history
        ```
    """

    _registry: dict[Path, JsonHistoryStore] = {}  # noqa: RUF012 (one store per file per process)
    _registry_lock = threading.Lock()

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False, lock_timeout: float = 0.0) -> None:
        self._path = Path(path).expanduser().resolve()
        self.fsync = fsync
        self.lock_timeout = lock_timeout
        self._lock = threading.Lock()
        self._file: BinaryIO | None = None
        self._slots: list[Record] = []  # one per message: its latest version, at the place of its first one
        self._positions: dict[str, int] = {}
        self._end = len(HEADER)
        self._bytes_after_end = True  # bytes may follow the footer (open, failed append): next append cuts them
        self._records_in_file = 0
        self._closed = False
        self._read_only = False
        self.recovered_from: Path | None = None
        """Where the damaged original was kept, when opening had to repair the file."""
        self.last_report: StoreReport | None = None
        """What the last open, `verify()` or `repair()` found."""

    @classmethod
    def reader(cls, path: str | os.PathLike[str]) -> JsonHistoryStore:
        """A store for reading `path`: this process's writer if it has one, else a read-only view that takes no
        lock, never rewrites the file, and re-reads it on every call (another process may be appending)."""
        resolved = Path(path).expanduser().resolve()
        with cls._registry_lock:
            store = cls._registry.get(resolved)
        if store is not None and not store._closed:
            return store
        view = cls(resolved)
        view._read_only = True
        return view

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, fsync: bool = False, lock_timeout: float = 0.0) -> JsonHistoryStore:
        """The process-wide store for `path` (created on first use)."""
        resolved = Path(path).expanduser().resolve()
        with cls._registry_lock:
            store = cls._registry.get(resolved)
            if store is None or store._closed:
                store = cls(resolved, fsync=fsync, lock_timeout=lock_timeout)
                cls._registry[resolved] = store
            # A later opener asking for more durability or patience gets it (never less than asked).
            store.fsync = store.fsync or fsync
            store.lock_timeout = max(store.lock_timeout, lock_timeout)
            return store

    @property
    def path(self) -> Path:
        return self._path

    # -- opening, locking and repair (sync, called under self._lock) ---------------------------------------------

    def _ensure_open(self) -> BinaryIO:
        if self._read_only:
            return self._open_read_only()
        if self._file is not None:
            return self._file
        if self._closed:
            raise HistoryStoreError(f"{self._path} was closed")
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            handle = acquire_lock(self._path, self.lock_timeout)
        except OSError as exc:
            raise HistoryStoreError(f"cannot open {self._path}: {exc}") from exc
        try:
            if os.fstat(handle.fileno()).st_size == 0:
                handle.write(HEADER + FOOTER[1:])
                handle.flush()
            handle.seek(0)
            self._file = handle
            self._refresh(handle.read(), repair=True)
            return self._file
        except BaseException as exc:
            for opened in {handle, self._file}:
                if opened is not None:
                    opened.close()
            self._file = None
            if isinstance(exc, OSError):
                raise HistoryStoreError(f"cannot open {self._path}: {exc}") from exc
            raise

    def _open_read_only(self) -> BinaryIO:
        """(Re)scan the file as it is now; damage is skipped (and logged), never repaired."""
        if self._file is not None:
            self._file.close()
            self._file = None
        try:
            handle = self._path.open("rb")
        except FileNotFoundError as exc:
            raise HistoryStoreError(f"no history file at {self._path}") from exc
        except OSError as exc:
            raise HistoryStoreError(f"cannot read {self._path}: {exc}") from exc
        self._file = handle
        self._refresh(handle.read(), repair=False)
        return handle

    def _refresh(self, data: bytes, *, repair: bool) -> StoreReport:
        """Index `data` (the whole file); with `repair`, rewrite a damaged file keeping every good record."""
        result = scan(data)
        if not result.records and not result.header:
            if repair:
                return self._import_foreign(data)
            raise HistoryStoreError(f"{self._path} is not a messages.json written by this library")
        if repair and not result.clean and not (result.header and result.records) and is_json_array(data):
            return self._import_foreign(data)  # valid JSON in another layout (e.g. indented)
        kept: Path | None = None
        if repair and not result.clean:
            kept = keep_damaged_copy(self._path, data)
            self._write_atomically(repaired(data, result.records))  # every good record at its offset
            self.recovered_from = kept
            report = report_of(self._path, result, kept)
            result = scan(self._read_all())
        else:
            report = report_of(self._path, result)
        warn(report)
        self.last_report = report
        self._slots, self._positions = [], {}
        for record in result.records:
            self._index(record)
        self._records_in_file = len(result.records)
        self._end = (result.records[-1].offset + result.records[-1].length) if result.records else len(HEADER)
        self._bytes_after_end = True
        return report

    def _index(self, record: Record) -> None:
        position = self._positions.get(record.message_id)
        if position is None:
            self._positions[record.message_id] = len(self._slots)
            self._slots.append(record)
        else:
            self._slots[position] = record  # a newer version, in the place of the first one

    def _read_all(self) -> bytes:
        handle = self._file
        assert handle is not None
        handle.seek(0)
        return handle.read()

    def _write_atomically(self, data: bytes) -> None:
        """Replace the file by `data`, keeping the lock (the new file, locked, becomes this store's handle)."""
        handle = write_atomically(self._path, data)
        if self._file is not None:
            self._file.close()
        self._file = handle

    def _import_foreign(self, data: bytes) -> StoreReport:
        """A history written by something else (any JSON array of messages): rewrite it in our format, with ids."""
        try:
            messages = ModelMessagesTypeAdapter.validate_json(data)
        except ValueError as exc:
            raise HistoryStoreError(
                f"{self._path} is neither a messages.json written by this library nor a JSON array of pydantic-ai "
                f"messages ({str(exc)[:300]}); move it away to start a new history"
            ) from exc
        for message in messages:
            ensure_message_id(message)
        self._path.with_name(self._path.name + ".imported").write_bytes(data)
        body = b",\n".join(encode(m)[0] for m in messages)
        self._write_atomically(HEADER + body + (FOOTER if messages else FOOTER[1:]))
        return self._refresh(self._read_all(), repair=False)

    # -- verify and repair ---------------------------------------------------------------------------------------

    def verify(self) -> StoreReport:
        """Check every record of the file; report damaged byte ranges and lost records. Changes nothing."""
        with self._lock:
            handle = self._file if (self._file is not None and not self._read_only) else None
            try:
                data = self._read_all() if handle is not None else self._path.read_bytes()
            except OSError as exc:
                raise HistoryStoreError(f"cannot read {self._path}: {exc}") from exc
            report = report_of(self._path, scan(data))
            self.last_report = report
            return report

    def repair(self) -> StoreReport:
        """Rewrite a damaged file atomically with every good record, keep the damaged original beside it
        (`kept_copy`), and report what was lost. Takes the writer's lock; a clean file is left as it is."""
        if self._read_only:
            raise HistoryStoreError(f"{self._path} is open read-only (JsonHistoryStore.reader); use open() to repair")
        with self._lock:
            if self._file is None:
                self._ensure_open()
                assert self.last_report is not None
                return self.last_report
            return self._refresh(self._read_all(), repair=True)

    # -- sync API (used by the async one, by tests and by benchmarks) ----------------------------------------------

    def append_sync(self, messages: Sequence[ModelMessage]) -> int:
        """Record new messages, and a new version of each recorded message whose content changed; returns how
        many records were written (the append itself is in `_appending`)."""
        if self._read_only:
            raise HistoryStoreError(f"{self._path} is open read-only (JsonHistoryStore.reader); use open() to write")
        with self._lock:
            handle = self._ensure_open()
            new = new_records(
                messages, self._slots, self._positions, read=lambda r: self._read_raw([r])[0], where=self._path
            )
            if not new:
                return 0
            chunk, records = place(new, self._end, after_records=self._records_in_file > 0)
            try:
                write_tail(handle, self._end, chunk, cut=self._bytes_after_end, fsync=self.fsync, where=self._path)
            except HistoryStoreError:
                self._bytes_after_end = True  # bytes of this append may follow the footer: the next one cuts them
                raise
            self._bytes_after_end = False
            for record in records:
                self._index(record)
            self._records_in_file += len(records)
            self._end = records[-1].offset + records[-1].length
            return len(records)

    def _read_raw(self, records: Sequence[Record]) -> list[ModelMessage]:
        # Every caller opened the file just before (a read-only view re-scans it on each open: once is enough).
        handle = self._file if self._file is not None else self._ensure_open()
        messages: list[ModelMessage] = []
        for record in records:
            try:
                handle.seek(record.offset)
                raw = handle.read(record.length)
                messages.append(ModelMessagesTypeAdapter.validate_json(b"[" + raw + b"]")[0])
            except (OSError, ValueError) as exc:
                raise HistoryStoreError(
                    f"{self._path}: the record at byte {record.offset} cannot be read as a message: {str(exc)[:300]}"
                ) from exc
        return messages

    def load_all_sync(self) -> list[ModelMessage]:
        with self._lock:
            self._ensure_open()
            return self._read_raw(self._slots)

    def load_sync(self) -> list[ModelMessage]:
        with self._lock:
            self._ensure_open()
            return self._read_raw(working_records(self._slots, self._positions))

    def read_sync(
        self, start_id: str | None = None, end_id: str | None = None, *, offset: int = 0, limit: int = 50
    ) -> HistoryPage:
        check_page(offset, limit)
        with self._lock:
            self._ensure_open()
            page, total, next_offset = page_of(
                self._slots, self._positions, start_id, end_id, offset=offset, limit=limit, where=self._path
            )
            return HistoryPage(self._read_raw(page), total, offset, next_offset)

    # -- async API --------------------------------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The name of the session folder holding the file (`<sessions>/<session_id>/messages.json`)."""
        return self._path.parent.name

    async def search(
        self,
        query: str,
        *,
        roles: Sequence[str] = (),
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchHit]:
        """Messages matching `query`, best first (see `SearchableHistoryStore`); scans the whole history."""
        where = SearchFilter(tuple(roles), tool_name, since, until)

        def scan() -> list[SearchHit]:
            messages = self.load_all_sync() if self._path.exists() else []
            texts = load_search_texts(self._path)
            return scan_search(self.session_id, messages, texts, query, where, limit=limit, offset=offset)

        return await anyio.to_thread.run_sync(scan)

    async def add_search_text(self, message_id: str, text: str) -> None:
        def add() -> None:
            with self._lock:
                self._ensure_open()
                if message_id not in self._positions:
                    raise HistoryStoreError(f"no message with id {message_id!r} in {self._path}")
                save_search_text(self._path, message_id, text)

        await anyio.to_thread.run_sync(add)

    async def search_texts(self) -> dict[str, str]:
        return await anyio.to_thread.run_sync(load_search_texts, self._path)

    async def load_versions(self) -> list[ModelMessage]:
        return await anyio.to_thread.run_sync(load_versions, self._path)

    async def append(self, messages: Sequence[ModelMessage]) -> int:
        return await anyio.to_thread.run_sync(self.append_sync, list(messages))

    async def load(self) -> list[ModelMessage]:
        return await anyio.to_thread.run_sync(self.load_sync)

    async def load_all(self) -> list[ModelMessage]:
        return await anyio.to_thread.run_sync(self.load_all_sync)

    async def read(
        self, start_id: str | None = None, end_id: str | None = None, *, offset: int = 0, limit: int = 50
    ) -> HistoryPage:
        return await anyio.to_thread.run_sync(lambda: self.read_sync(start_id, end_id, offset=offset, limit=limit))

    async def open_async(self) -> None:
        """Open (lock, repair) now rather than on first use."""
        await anyio.to_thread.run_sync(self._open_locked)

    def _open_locked(self) -> None:
        with self._lock:
            self._ensure_open()

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._positions

    def __len__(self) -> int:
        """How many messages (and summaries) are recorded; versions of one message count once."""
        return len(self._slots)

    def size_bytes(self) -> int:
        return (
            self._end + len(FOOTER)
            if self._file is not None
            else (self._path.stat().st_size if self._path.exists() else 0)
        )

    def close(self) -> None:
        """Release the file and its lock (also when closing the file fails)."""
        with self._lock:
            handle, self._file = self._file, None
            self._closed = True
            if handle is not None:
                try:
                    handle.close()
                except OSError as exc:
                    with contextlib.suppress(OSError, ValueError):
                        os.close(handle.fileno())
                    raise HistoryStoreError(f"closing {self._path} failed: {exc}") from exc
