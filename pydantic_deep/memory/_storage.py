"""Where a memory file lives, and the locks that make its writers take turns.

`MemoryLocation` is resolved for every use from the toolset's arguments and the run's deps (see
`AgentMemoryToolset`): an explicit backend, the deps' `base_dir` on disk, the deps' backend, or — with none of these —
the current directory.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import time
import weakref
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

from ..backends import BackendProtocol, CompositeBackend, LocalBackend, PathEscapeError, normalize_path

if TYPE_CHECKING:
    from ..storage._protocols import MemoryStore

__all__ = ["MemoryLocation"]

MEMORY_FILE = "MEMORY.md"
DEFAULT_AGENT_NAME = "main"
PROCESS_LOCK_TIMEOUT = 10.0
"""Seconds to wait for another process's lock on a local memory directory before giving up (a tool failure)."""

# One asyncio.Lock per (event loop, storage, file): writers in this process take turns on a file, whichever
# AgentMemoryToolset instance they go through. Values are weak: a lock nobody holds or waits on is dropped.
_LOCKS: weakref.WeakValueDictionary[tuple[int, tuple[str, object], str], asyncio.Lock] = weakref.WeakValueDictionary()


class LockTimeout(Exception):
    """Another process held the memory directory's lock for over `PROCESS_LOCK_TIMEOUT` seconds."""


@dataclass(frozen=True)
class MemoryLocation:
    """Where one memory file is: `path` on `backend`, or, when `backend` is None, on a `LocalBackend` over the
    on-disk `directory` (made on first write: reading a memory that was never written creates nothing)."""

    path: str
    backend: BackendProtocol | None = None
    directory: str | None = None
    store: MemoryStore | None = None
    """The memory is in this store (a database), under `agent_name`, not in a file."""
    agent_name: str | None = None

    def open(self, *, create: bool) -> BackendProtocol | None:
        """The backend holding the file; `None` when it is on disk in a directory that does not exist (and not
        `create`)."""
        if self.backend is not None:
            return self.backend
        assert self.directory is not None
        if not create and not os.path.isdir(self.directory):
            return None
        return LocalBackend(self.directory)


def check_agent_name(agent_name: object, source: str = "agent_name") -> str:
    if not isinstance(agent_name, str):
        raise TypeError(f"{source} must be a string, got {type(agent_name).__name__}")
    bad = (
        agent_name.strip() == ""
        or agent_name in {".", ".."}
        or any(c in agent_name for c in "/\\\x00")
        or len(agent_name.encode("utf-8", "surrogatepass")) > 255
    )
    if bad:
        raise ValueError(
            f"{source} must be a plain directory name (no '/', '\\\\', NUL, '.' or '..'; at most 255 bytes), "
            f"got {agent_name!r}"
        )
    return agent_name


def check_memory_dir(memory_dir: object) -> str:
    if isinstance(memory_dir, os.PathLike):
        memory_dir = PurePath(os.fspath(memory_dir)).as_posix()  # pyright: ignore[reportUnknownArgumentType]
    if not isinstance(memory_dir, str):
        raise TypeError(f"memory_dir must be a string (a path on the backend), got {type(memory_dir).__name__}")
    try:
        return normalize_path(memory_dir)
    except PathEscapeError as exc:
        raise ValueError(f"memory_dir {memory_dir!r} is not a usable path inside the backend: {exc}") from exc


def memory_path(directory: str, agent_name: str) -> str:
    return normalize_path(f"{directory}/{agent_name}/{MEMORY_FILE}")


def version(content: str | None) -> str | None:
    """The version compared before a write: a hash of the content (`None` while the file does not exist)."""
    if content is None:
        return None
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def _storage(backend: BackendProtocol, path: str) -> BackendProtocol:
    """The backend that actually stores `path` (through `CompositeBackend` routes)."""
    while isinstance(backend, CompositeBackend):
        backend = backend.backend_for(path)
    return backend


def _storage_key(backend: BackendProtocol) -> tuple[str, object]:
    """What identifies a storage: two `LocalBackend`s over one directory are the same storage."""
    if isinstance(backend, LocalBackend):
        return ("local", str(backend.root))
    return ("object", id(backend))


def _lock_for(backend: BackendProtocol, path: str) -> asyncio.Lock:
    key = (id(asyncio.get_running_loop()), _storage_key(backend), path)
    lock = _LOCKS.get(key)
    if lock is None:
        lock = asyncio.Lock()
        _LOCKS[key] = lock
    return lock


@asynccontextmanager
async def _process_lock(backend: BackendProtocol, *, shared: bool) -> AsyncGenerator[None, None]:
    """An advisory `flock` on a `LocalBackend`'s root directory, so processes take turns too (POSIX only).

    Polled without blocking (cancellable); `LockTimeout` after `PROCESS_LOCK_TIMEOUT` seconds. Other backends (and
    Windows) get no cross-process lock: the compare-and-swap of the writes is what protects them.
    """
    if fcntl is None or not isinstance(backend, LocalBackend):
        yield
        return
    fd = os.open(backend.root, os.O_RDONLY)
    try:
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        deadline = time.monotonic() + PROCESS_LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, mode)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockTimeout from None
                await asyncio.sleep(random.uniform(0.002, 0.01))
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@asynccontextmanager
async def guard(backend: BackendProtocol, path: str, *, shared: bool = False) -> AsyncGenerator[None, None]:
    """Exclusive in this process (per file), and shared or exclusive across processes for local storage."""
    storage = _storage(backend, path)
    async with _lock_for(storage, path), _process_lock(storage, shared=shared):
        yield
