"""Reading and changing the memory safely: a read under the shared lock, a change made as a compare-and-swap
retried while other writers interfere (a file under the exclusive lock, or a `MemoryStore`'s atomic swap), and the
tool error that says what the storage did wrong."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from pydantic_ai import ToolFailed

from summarization_pydantic_ai import HistoryStoreError

from ..backends import BackendError, BackendProtocol, PathEscapeError
from ..storage._protocols import MemoryStore, StorageError
from ._storage import DEFAULT_AGENT_NAME, PROCESS_LOCK_TIMEOUT, LockTimeout, MemoryLocation, guard, version

__all__ = ["CAS_ATTEMPTS", "STORAGE_ERRORS", "describe", "load_locked", "modify"]

CAS_ATTEMPTS = 8
"""How many times a write re-reads and recomputes when another writer changed the file in between."""
STORAGE_ERRORS = (OSError, BackendError, LockTimeout, ValueError, TypeError, StorageError, HistoryStoreError)


async def _load(backend: BackendProtocol, path: str) -> str | None:
    """The file's text, or None while it does not exist."""
    try:
        return await backend.read(path)
    except FileNotFoundError:
        return None


async def load_locked(where: MemoryLocation) -> str | None:
    """The memory's text (None while it does not exist), read under the shared lock."""
    if where.store is not None:
        return await where.store.read(where.agent_name or DEFAULT_AGENT_NAME)
    backend = where.open(create=False)
    if backend is None:
        return None
    async with guard(backend, where.path, shared=True):
        return await _load(backend, where.path)


async def modify(
    locate: Callable[[], MemoryLocation],
    change: Callable[[str | None], str],
    action: str,
    landed: Callable[[str | None, str | None], bool] | None = None,
) -> tuple[str, MemoryLocation]:
    """Apply `change` to the content of the memory `locate` finds as a compare-and-swap, retried while other
    writers interfere.

    `change` raises `ToolFailed` when it does not apply. `landed(before, now)` checks after the write that it
    was not overwritten by a writer in another process; if it was, the change is made again.
    """
    where: MemoryLocation | None = None
    try:
        where = locate()
        if where.store is not None:
            after = await _swap(where.store, where.agent_name or DEFAULT_AGENT_NAME, change)
            if after is not None:
                return after, where
            raise ToolFailed(
                f"memory at {where.path} kept changing while saving ({CAS_ATTEMPTS} attempts; another writer is "
                "busy with it): call the tool again"
            )
        backend = where.open(create=True)
        assert backend is not None
        async with guard(backend, where.path):
            for attempt in range(CAS_ATTEMPTS):
                before = await _load(backend, where.path)
                after = change(before)
                if version(await _load(backend, where.path)) == version(before):
                    await backend.write(where.path, after)
                    if landed is None or landed(before, await _load(backend, where.path)):
                        return after, where
                await asyncio.sleep(random.uniform(0.001, 0.005) * (attempt + 1))
    except STORAGE_ERRORS as exc:
        raise ToolFailed(describe(exc, action, where)) from exc
    raise ToolFailed(
        f"memory at {where.path} kept changing while saving ({CAS_ATTEMPTS} attempts; another writer is busy "
        "with it): call the tool again"
    )


async def _swap(store: MemoryStore, name: str, change: Callable[[str | None], str]) -> str | None:
    """`change` applied with the store's compare-and-swap, retried while other writers interfere (`None`: gave up).
    The swap is atomic: what it wrote has landed (no re-check as for files)."""
    for attempt in range(CAS_ATTEMPTS):
        before = await store.read(name)
        after = change(before)
        if await store.compare_and_swap(name, before, after):
            return after
        await asyncio.sleep(random.uniform(0.001, 0.005) * (attempt + 1))
    return None


def describe(exc: BaseException, action: str, where: MemoryLocation | None) -> str:
    """The tool error for a storage failure: what could not be done, where, and why."""
    at = f" at {where.path}" if where is not None else ""
    if isinstance(exc, LockTimeout):
        return (
            f"could not {action} memory{at}: another process has held its lock for over {PROCESS_LOCK_TIMEOUT:g} s. "
            "Try again later."
        )
    if isinstance(exc, PathEscapeError):
        reason = f"access denied ({exc})"
    elif isinstance(exc, IsADirectoryError):
        reason = "it is a directory"
    elif isinstance(exc, NotADirectoryError):
        reason = "a file stands where one of its directories should be"
    elif isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
    else:
        reason = str(exc)
    return f"could not {action} memory{at}: {reason}. This is a problem of the storage; tell the user."
