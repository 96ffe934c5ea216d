"""The default history store: `messages.json`, an append-only JSON array, one record per line.

```
[
{"parts": [...], "kind": "request", "metadata": {"summarization_pydantic_ai.message_id": "..."}, ...},
{"parts": [...], "kind": "response", ...}
]
```

- It always is a JSON array that `ModelMessagesTypeAdapter.validate_json` loads (summary records included).
- An append writes only the new records: it overwrites the closing `\\n]\\n` with `,\\n<records>\\n]\\n`, so
  its cost is proportional to the new messages, not to the file.
- A crash at any byte leaves a torn tail at worst. On open the valid prefix is recovered (every record whose
  append had returned survives a killed process) and the damaged original is kept beside it as
  `messages.json.torn-<timestamp>`. With `fsync=True` appends also survive a power loss.
- An advisory lock (`messages.json.lock`) keeps a second process from writing the same file: it gets a
  `HistoryStoreLockedError` at once, or waits up to `lock_timeout` seconds.
- File I/O runs in a worker thread; the event loop never waits on the disk.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import anyio.to_thread
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from .._messages import MESSAGE_ID_KEY, SUMMARY_METADATA_KEY, get_message_id, summary_info
from ._protocol import HistoryPage, HistoryStoreError, HistoryStoreLockedError, ensure_message_id

__all__ = ["JsonHistoryStore"]

_HEADER = b"[\n"
_FOOTER = b"\n]\n"


@dataclass
class _Record:
    offset: int
    length: int
    message_id: str
    summary: dict[str, Any] | None


def _encode(message: ModelMessage) -> bytes:
    return ModelMessagesTypeAdapter.dump_json([message])[1:-1]


def _decode(raw: bytes) -> ModelMessage:
    return ModelMessagesTypeAdapter.validate_json(b"[" + raw + b"]")[0]


def _record_info(obj: Any) -> tuple[str | None, dict[str, Any] | None]:
    """(message id, summary provenance) of a parsed record."""
    if not isinstance(obj, dict) or obj.get("kind") not in ("request", "response"):  # pyright: ignore[reportUnknownMemberType]
        raise ValueError("not a message record")
    metadata = obj.get("metadata") or {}  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    message_id = metadata.get(MESSAGE_ID_KEY) if isinstance(metadata, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    summary = None
    for part in obj.get("parts") or ():  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        part_metadata = part.get("metadata") if isinstance(part, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if part.get("part_kind") == "compaction" and isinstance(part_metadata, dict):  # pyright: ignore[reportUnknownMemberType]
            info = part_metadata.get(SUMMARY_METADATA_KEY)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            summary = info if isinstance(info, dict) else summary  # pyright: ignore[reportUnknownVariableType]
    return (message_id if isinstance(message_id, str) else None), summary  # pyright: ignore[reportUnknownVariableType]


def _scan(data: bytes) -> tuple[list[_Record], int, bool]:
    """Parse our line format. Returns (records, end offset of the last record, whether the file is intact)."""
    if not data.startswith(_HEADER):
        raise ValueError("missing header")
    records: list[_Record] = []
    position = len(_HEADER)
    end = position
    while position < len(data):
        newline = data.find(b"\n", position)
        if newline < 0:
            # Only the final newline missing is harmless (the next append rewrites the footer); else torn.
            return records, end, data[position:] == b"]" and data[end : end + 1] != b","
        line = data[position:newline]
        if line == b"]":
            # Intact: nothing after the closing bracket, and no dangling comma after the last record.
            intact = newline + 1 == len(data) and data[end : end + 1] != b","
            return records, end, intact
        raw = line[:-1] if line.endswith(b",") else line
        try:
            message_id, summary = _record_info(json.loads(raw))
        except ValueError:
            return records, end, False
        if message_id is None:
            raise ValueError("a record without a message id")
        if records and not data[end:position].startswith(b","):
            return records, end, False
        records.append(_Record(position, len(raw), message_id, summary))
        end = position + len(raw)
        position = newline + 1
    return records, end, False


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
        self._lock_file: BinaryIO | None = None
        self._records: list[_Record] = []
        self._positions: dict[str, int] = {}
        self._end = len(_HEADER)
        self._closed = False
        self._read_only = False
        self.recovered_from: Path | None = None
        """Where the damaged original was kept, when opening had to recover a torn file."""

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

    # -- opening, locking and recovery (sync, called under self._lock) -------------------------------------------

    def _ensure_open(self) -> BinaryIO:
        if self._read_only:
            return self._open_read_only()
        if self._file is not None:
            return self._file
        if self._closed:
            raise HistoryStoreError(f"{self._path} was closed")
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        if not self._path.exists() or self._path.stat().st_size == 0:
            self._write_atomically(_HEADER + _FOOTER[1:])
        data = self._path.read_bytes()
        try:
            records, end, intact = _scan(data)
        except ValueError:
            records, end, intact = self._import_foreign(data)
        if not intact and _is_complete_json_array(data):
            records, end, intact = self._import_foreign(data)  # valid JSON in another layout (e.g. indented)
        if not intact:
            self._recover(data, records)
            data = self._path.read_bytes()
            records, end, intact = _scan(data)
        self._records = records
        self._positions = {r.message_id: i for i, r in enumerate(records)}
        self._end = end
        self._file = self._path.open("r+b")
        return self._file

    def _open_read_only(self) -> BinaryIO:
        """(Re)scan the file as it is now; a torn tail is ignored, not repaired."""
        if self._file is not None:
            self._file.close()
        try:
            handle = self._path.open("rb")
        except FileNotFoundError as exc:
            raise HistoryStoreError(f"no history file at {self._path}") from exc
        try:
            records, end, _ = _scan(handle.read())
        except ValueError as exc:
            handle.close()
            raise HistoryStoreError(f"{self._path} is not a messages.json written by this library") from exc
        self._records, self._end, self._file = records, end, handle
        self._positions = {r.message_id: i for i, r in enumerate(records)}
        return handle

    def _acquire_lock(self) -> None:
        lock_path = self._path.with_name(self._path.name + ".lock")
        handle = lock_path.open("a+b")
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.seek(0)
                    owner = handle.read().decode(errors="replace").strip() or "unknown"
                    handle.close()
                    if owner == str(os.getpid()):
                        raise HistoryStoreLockedError(
                            f"{self._path} is already open in this process; share it with JsonHistoryStore.open(path)"
                        ) from None
                    raise HistoryStoreLockedError(
                        f"{self._path} is being written by another process (pid {owner}); use one writer per "
                        f"session, or pass lock_timeout=... to wait for it"
                    ) from None
                time.sleep(0.05)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()).encode())
        handle.flush()
        self._lock_file = handle

    def _write_atomically(self, data: bytes) -> None:
        temporary = self._path.with_name(f".{self._path.name}.{os.getpid()}.tmp")
        with temporary.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self._path)

    def _recover(self, data: bytes, records: list[_Record]) -> None:
        """Keep the damaged file aside and rewrite the valid prefix."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        kept = self._path.with_name(f"{self._path.name}.torn-{stamp}")
        kept.write_bytes(data)
        body = b",\n".join(data[r.offset : r.offset + r.length] for r in records)
        self._write_atomically(_HEADER + body + (_FOOTER if records else _FOOTER[1:]))
        self.recovered_from = kept

    def _import_foreign(self, data: bytes) -> tuple[list[_Record], int, bool]:
        """A history written by something else (any JSON array of messages): rewrite it in our format, with ids."""
        try:
            messages = ModelMessagesTypeAdapter.validate_json(data)
        except ValueError as exc:
            raise HistoryStoreError(
                f"{self._path} is neither a messages.json written by this library nor a JSON array of pydantic-ai "
                f"messages ({exc}); move it away to start a new history"
            ) from exc
        for message in messages:
            ensure_message_id(message)
        self._path.with_name(self._path.name + ".imported").write_bytes(data)
        body = b",\n".join(_encode(m) for m in messages)
        self._write_atomically(_HEADER + body + (_FOOTER if messages else _FOOTER[1:]))
        return _scan(self._path.read_bytes())

    # -- sync API (used by the async one, by tests and by benchmarks) ----------------------------------------------

    def append_sync(self, messages: Sequence[ModelMessage]) -> int:
        if self._read_only:
            raise HistoryStoreError(f"{self._path} is open read-only (JsonHistoryStore.reader); use open() to write")
        with self._lock:
            handle = self._ensure_open()
            new: list[tuple[str, bytes, ModelMessage]] = []
            batch: set[str] = set()
            for message in messages:
                message_id = get_message_id(message)
                if message_id is None:
                    raise HistoryStoreError("every recorded message needs an id: call ensure_message_id first")
                if message_id in self._positions or message_id in batch:
                    continue
                batch.add(message_id)
                new.append((message_id, _encode(message), message))
            if not new:
                return 0
            chunk = bytearray()
            offsets: list[int] = []
            for _, raw, _ in new:
                if self._records or offsets:
                    chunk += b",\n"
                offsets.append(self._end + len(chunk))
                chunk += raw
            handle.seek(self._end)
            handle.write(bytes(chunk) + _FOOTER)
            handle.flush()
            if self.fsync:
                os.fsync(handle.fileno())
            for (message_id, raw, message), offset in zip(new, offsets, strict=True):
                self._positions[message_id] = len(self._records)
                self._records.append(_Record(offset, len(raw), message_id, _summary_of(message)))
            self._end = offsets[-1] + len(new[-1][1])
            return len(new)

    def _read_raw(self, records: Sequence[_Record]) -> list[ModelMessage]:
        handle = self._ensure_open()
        messages: list[ModelMessage] = []
        for record in records:
            handle.seek(record.offset)
            messages.append(_decode(handle.read(record.length)))
        return messages

    def load_all_sync(self) -> list[ModelMessage]:
        with self._lock:
            self._ensure_open()
            return self._read_raw(self._records)

    def load_sync(self) -> list[ModelMessage]:
        with self._lock:
            self._ensure_open()
            return self._read_raw(self._working_records())

    def _working_records(self) -> list[_Record]:
        """The latest summary, what it kept around it, and everything recorded after it."""
        records = self._records
        latest = next((i for i in range(len(records) - 1, -1, -1) if records[i].summary), None)
        if latest is None:
            return list(records)
        info = records[latest].summary or {}
        later = [r for r in records[latest + 1 :] if not r.summary]
        if "working_before" in info or "working_after" in info:
            before = [records[self._positions[i]] for i in info.get("working_before", []) if i in self._positions]
            after = [records[self._positions[i]] for i in info.get("working_after", []) if i in self._positions]
            return [*before, records[latest], *after, *later]
        # A summary written by a plain processor: everything before it that it (transitively) did not cover.
        covered = self._covered(info)
        kept = [r for r in records[:latest] if not r.summary and r.message_id not in covered]
        first_covered = next((i for i, r in enumerate(records[:latest]) if r.message_id in covered), latest)
        head = [r for r in kept if r.offset < records[first_covered].offset] if first_covered < latest else kept
        tail = kept[len(head) :]
        return [*head, records[latest], *tail, *later]

    def _covered(self, info: dict[str, Any]) -> set[str]:
        covered: set[str] = set(info.get("covers", []))
        for summary_id in info.get("replaces_summaries", []):
            position = self._positions.get(summary_id)
            if position is not None and self._records[position].summary:
                covered |= self._covered(self._records[position].summary or {})
        return covered

    def read_sync(
        self, start_id: str | None = None, end_id: str | None = None, *, offset: int = 0, limit: int = 50
    ) -> HistoryPage:
        if offset < 0 or limit <= 0:
            raise HistoryStoreError(f"offset must be >= 0 and limit > 0, got offset={offset}, limit={limit}")
        with self._lock:
            self._ensure_open()
            start = self._index_of(start_id, default=0)
            end = self._index_of(end_id, default=len(self._records) - 1)
            if start > end:
                raise HistoryStoreError(f"start_id {start_id!r} comes after end_id {end_id!r}")
            span = self._records[start : end + 1]
            page = span[offset : offset + limit]
            next_offset = offset + limit if offset + limit < len(span) else None
            return HistoryPage(self._read_raw(page), len(span), offset, next_offset)

    def _index_of(self, message_id: str | None, *, default: int) -> int:
        if message_id is None:
            return default
        position = self._positions.get(message_id)
        if position is None:
            raise HistoryStoreError(f"no message with id {message_id!r} in {self._path}")
        return position

    # -- async API --------------------------------------------------------------------------------------------------

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
        """Open (lock, recover) now rather than on first use."""
        await anyio.to_thread.run_sync(self._open_locked)

    def _open_locked(self) -> None:
        with self._lock:
            self._ensure_open()

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._positions

    def __len__(self) -> int:
        return len(self._records)

    def size_bytes(self) -> int:
        return (
            self._end + len(_FOOTER)
            if self._file is not None
            else (self._path.stat().st_size if self._path.exists() else 0)
        )

    def close(self) -> None:
        """Release the file and its lock."""
        with self._lock:
            for handle in (self._file, self._lock_file):
                if handle is not None:
                    handle.close()
            self._file = self._lock_file = None
            self._closed = True


def _is_complete_json_array(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), list)
    except ValueError:
        return False


def _summary_of(message: ModelMessage) -> dict[str, Any] | None:
    return summary_info(message)
