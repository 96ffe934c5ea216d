"""The default history store: `messages.json`, an append-only JSON array, one checksummed record per line.

- It always is a JSON array that `ModelMessagesTypeAdapter.validate_json` loads; the framing is in `_framing`.
- An append (`_appending`) writes only the new records, over the closing `\n]\n`: its cost is that of the new messages.
- A message appended again with new content is a new version; reads return the latest at the first's place.
- Damage anywhere loses only the damaged records; opening for writing repairs the file (`_json_file`: each good
  record at its offset, the damaged original kept beside it) and logs a warning; `verify()` reports, `repair()`
  repairs.
- The writer `flock`s the data file itself (`_locking`): deleting a file cannot let a second writer in.
- File I/O runs in a worker thread; the event loop never waits on the disk.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import anyio.to_thread
from pydantic_ai.messages import ModelMessage

from .._tokens import count_tokens_approximately
from ._appending import new_records, place, write_tail
from ._catalog_file import FileCatalogWriter
from ._database import SearchHit
from ._file_search import search_file
from ._framing import FOOTER, scan
from ._json_file import JsonFile
from ._json_index import FileIndex
from ._json_search import load_search_texts, load_versions, save_search_text
from ._paging import check_page, page_of
from ._protocol import HistoryPage, HistoryStoreError
from ._report import StoreReport, report_of
from ._scan_search import SearchFilter, scan_search

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
        self._opened = JsonFile(self._path, read_only=False)
        self._closed = False
        self._catalog = FileCatalogWriter(self._path)  # messages.json.catalog, what a listing reads

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
        view._opened.read_only = True
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

    @property
    def recovered_from(self) -> Path | None:
        """Where the damaged original was kept, when opening had to repair the file."""
        return self._opened.recovered_from

    @property
    def last_report(self) -> StoreReport | None:
        """What the last open, `verify()` or `repair()` found."""
        return self._opened.last_report

    def _ensure_open(self) -> JsonFile:
        """The open file (sync, under `self._lock`); a read-only view reads the file again on every call."""
        opened = self._opened
        if opened.read_only:
            opened.open_read_only()
        elif opened.handle is None:
            if self._closed:
                raise HistoryStoreError(f"{self._path} was closed")
            opened.open_for_writing(self.lock_timeout)
        return opened

    # -- verify and repair ---------------------------------------------------------------------------------------

    def verify(self) -> StoreReport:
        """Check every record of the file; report damaged byte ranges and lost records. Changes nothing."""
        with self._lock:
            opened = self._opened
            try:
                data = opened.read_all() if opened.handle is not None and not opened.read_only else None
                data = self._path.read_bytes() if data is None else data
            except OSError as exc:
                raise HistoryStoreError(f"cannot read {self._path}: {exc}") from exc
            report = opened.last_report = report_of(self._path, scan(data))
            return report

    def repair(self) -> StoreReport:
        """Rewrite a damaged file atomically with every good record, keep the damaged original beside it
        (`kept_copy`), and report what was lost. Takes the writer's lock; a clean file is left as it is."""
        if self._opened.read_only:
            raise HistoryStoreError(f"{self._path} is open read-only (JsonHistoryStore.reader); use open() to repair")
        with self._lock:
            opened = self._opened
            if opened.handle is None or opened.index is None:
                self._ensure_open().ensure_index()
                assert opened.last_report is not None
                return opened.last_report
            return opened.refresh(opened.read_all(), repair=True)

    # -- sync API (used by the async one, by tests and by benchmarks) ----------------------------------------------

    def append_sync(self, messages: Sequence[ModelMessage]) -> int:
        """Record new messages, and a new version of each recorded message whose content changed; returns how
        many records were written (the append itself is in `_appending`)."""
        if self._opened.read_only:
            raise HistoryStoreError(f"{self._path} is open read-only (JsonHistoryStore.reader); use open() to write")
        with self._lock:
            opened = self._ensure_open()
            index = opened.ensure_index()
            new = new_records(
                messages, index.slots, index.positions, read=lambda r: opened.read_messages([r])[0], where=self._path
            )
            if not new:
                return 0
            assert opened.handle is not None
            catalogued = self._catalog.prepare(opened.handle, new, index.positions)
            chunk, records = place(new, index.end, after_records=index.records_in_file > 0)
            try:
                write_tail(
                    opened.handle, index.end, chunk, cut=opened.bytes_after_end, fsync=self.fsync, where=self._path
                )
            except HistoryStoreError:
                opened.bytes_after_end = True  # bytes of this append may follow the footer: the next one cuts them
                raise
            opened.bytes_after_end = False
            opened.save_point([(record, index.add(record)) for record in records])
            self._catalog.commit(catalogued, opened.handle)
            return len(records)

    def load_all_sync(self) -> list[ModelMessage]:
        with self._lock:
            opened = self._ensure_open()
            return opened.read_messages(opened.ensure_index().slots)

    def load_sync(self) -> list[ModelMessage]:
        """The working context (see `load`). Its messages are also measured for `count_tokens_approximately`
        here, while decoding has them in the CPU's caches: the first count of a loaded history costs a lookup,
        and an event loop never measures it."""
        with self._lock:
            messages = self._ensure_open().load_working()
        count_tokens_approximately(messages)
        return messages

    def read_sync(
        self, start_id: str | None = None, end_id: str | None = None, *, offset: int = 0, limit: int = 50
    ) -> HistoryPage:
        check_page(offset, limit)
        with self._lock:
            opened = self._ensure_open()
            index = opened.ensure_index()
            page, total, next_offset = page_of(
                index.slots, index.positions, start_id, end_id, offset=offset, limit=limit, where=self._path
            )
            return HistoryPage(opened.read_messages(page), total, offset, next_offset)

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
        """Messages matching `query`, best first (see `SearchableHistoryStore`): through the search index beside the
        file (`messages.json.index.sqlite`, built on first use, then caught up with what was appended since), ranked
        as a scan of the whole history would rank them."""
        where = SearchFilter(tuple(roles), tool_name, since, until)

        def run() -> list[SearchHit]:
            hits = search_file(self._path, self.session_id, query, where, limit=limit, offset=offset)
            if hits is not None:
                return hits
            messages = self.load_all_sync() if self._path.exists() else []  # a query FTS5 cannot express
            texts = load_search_texts(self._path)
            return scan_search(self.session_id, messages, texts, query, where, limit=limit, offset=offset)

        return await anyio.to_thread.run_sync(run)

    async def add_search_text(self, message_id: str, text: str) -> None:
        def add() -> None:
            with self._lock:
                if message_id not in self._ensure_open().ensure_index().positions:
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
        opened = self._opened
        if opened.index is None and (opened.handle is None or opened.is_loaded(message_id)):
            return opened.handle is not None  # nothing opened yet, or read by load()
        return message_id in self._index().positions

    def __len__(self) -> int:
        """How many messages (and summaries) are recorded; versions of one message count once."""
        return len(self._index().slots) if self._opened.handle is not None else 0

    def _index(self) -> FileIndex:
        """The index of every record (the first call after a `load()` through the resume point builds it)."""
        with self._lock:
            index = self._opened.index
            return index if index is not None else self._opened.ensure_index()

    def size_bytes(self) -> int:
        index = self._opened.index
        if self._opened.handle is not None and index is not None:
            return index.end + len(FOOTER)
        return self._path.stat().st_size if self._path.exists() else 0

    def close(self) -> None:
        """Release the file and its lock (also when closing the file fails)."""
        with self._lock:
            self._closed = True
            self._opened.close()
