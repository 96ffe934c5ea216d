"""`AgentMemoryToolset`: a MEMORY.md file the agent reads in its instructions and edits with three tools.

The memory is a file on a backend, not part of the message history: compaction cannot touch it and a new session (a
new agent, a new process) sees it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import time
import weakref
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

from pydantic_ai import FunctionToolset, RunContext, ToolFailed
from pydantic_ai.capabilities import AbstractCapability

from ..backends import BackendError, BackendProtocol, CompositeBackend, LocalBackend, PathEscapeError, normalize_path

__all__ = [
    "MAX_INSTRUCTION_CHARS",
    "MAX_LINE_CHARS",
    "MAX_READ_CHARS",
    "MEMORY_FILE",
    "READ_LIMIT",
    "AgentMemoryToolset",
]

MEMORY_FILE = "MEMORY.md"
READ_LIMIT = 1_000
"""Lines `read_memory` returns per call when the model gives no `limit`."""
MAX_READ_CHARS = 100_000
"""`read_memory` stops early (at a line boundary, with a paging hint) once its output would exceed this."""
MAX_LINE_CHARS = 2_000
"""In the instructions, a longer memory line is cut (with a marker); `read_memory` shows it whole."""
MAX_INSTRUCTION_CHARS = 50_000
"""The memory shown in the instructions stops early (with the usual "more lines" note) past this many characters."""
CAS_ATTEMPTS = 8
"""How many times a write re-reads and recomputes when another writer changed the file in between."""

_HEADING = "## Agent Memory"
_TOOLS_HINT = (
    "write_memory(content) appends an entry, update_memory(old_text, new_text) corrects or removes one "
    "(new_text='' deletes), read_memory() shows the whole file."
)

PROCESS_LOCK_TIMEOUT = 10.0
"""Seconds to wait for another process's lock on a local memory directory before giving up (a tool failure)."""

# One asyncio.Lock per (event loop, storage, file): writers in this process take turns on a file, whichever
# AgentMemoryToolset instance they go through. Values are weak: a lock nobody holds or waits on is dropped.
_LOCKS: weakref.WeakValueDictionary[tuple[int, tuple[str, object], str], asyncio.Lock] = weakref.WeakValueDictionary()


class _LockTimeout(Exception):
    pass


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

    Polled without blocking (cancellable); `_LockTimeout` after `PROCESS_LOCK_TIMEOUT` seconds. Other backends (and
    Windows) get no cross-process lock: the compare-and-swap in `_modify` is what protects them.
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
                    raise _LockTimeout from None
                await asyncio.sleep(random.uniform(0.002, 0.01))
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@asynccontextmanager
async def _guard(backend: BackendProtocol, path: str, *, shared: bool = False) -> AsyncGenerator[None, None]:
    """Exclusive in this process (per file), and shared or exclusive across processes for local storage."""
    storage = _storage(backend, path)
    async with _lock_for(storage, path), _process_lock(storage, shared=shared):
        yield


def _version(content: str | None) -> str | None:
    """The version compared before a write: a hash of the content (`None` while the file does not exist)."""
    if content is None:
        return None
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def _lines(text: str) -> list[str]:
    """The file's lines; a trailing newline does not start another line."""
    if text == "":
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def _count(n: int, noun: str = "line") -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _cut(line: str, max_chars: int) -> str:
    line = line.removesuffix("\r")
    if len(line) <= max_chars:
        return line
    return line[:max_chars] + f"… [line cut: {len(line) - max_chars:,} more chars; read_memory shows it whole]"


def _check_agent_name(agent_name: object) -> str:
    if not isinstance(agent_name, str):
        raise TypeError(f"agent_name must be a string, got {type(agent_name).__name__}")
    bad = (
        agent_name.strip() == ""
        or agent_name in {".", ".."}
        or any(c in agent_name for c in "/\\\x00")
        or len(agent_name.encode("utf-8", "surrogatepass")) > 255
    )
    if bad:
        raise ValueError(
            f"agent_name must be a plain directory name (no '/', '\\\\', NUL, '.' or '..'; at most 255 bytes), "
            f"got {agent_name!r}"
        )
    return agent_name


def _check_memory_dir(memory_dir: object) -> str:
    if isinstance(memory_dir, os.PathLike):
        memory_dir = PurePath(os.fspath(memory_dir)).as_posix()  # pyright: ignore[reportUnknownArgumentType]
    if not isinstance(memory_dir, str):
        raise TypeError(f"memory_dir must be a string (a path on the backend), got {type(memory_dir).__name__}")
    try:
        return normalize_path(memory_dir)
    except PathEscapeError as exc:
        raise ValueError(f"memory_dir {memory_dir!r} is not a usable path inside the backend: {exc}") from exc


@dataclass
class AgentMemoryToolset(AbstractCapability[Any]):
    """Persistent agent memory in `{memory_dir}/{agent_name}/MEMORY.md`, as a pydantic-ai capability.

    Add it to an agent with `Agent(..., capabilities=[AgentMemoryToolset()])` (or `create_deep_agent(memory=...)`).
    It contributes:

    - an `## Agent Memory` section of the instructions, rebuilt for every model request: the first `max_lines`
      lines of MEMORY.md, a note saying how many more lines there are (call `read_memory` for them), or, while the
      file does not exist, a short note that memory is empty and how to write it;
    - the tools `read_memory(offset=0, limit=1000)` (the file's text as it is, no line numbers, so it can be copied
      into `update_memory`; paged), `write_memory(content)` (appends an entry, creating the file and its
      directories) and `update_memory(old_text, new_text)` (`old_text` must occur exactly once).

    A failure (text not found or found several times, an empty entry, a file that cannot be written) is a failed
    tool call (`ToolFailed`) whose message says what to do: the run goes on and no retry budget is used.

    Writers cannot lose each other's edits: in one process, writes to the same file take turns (an asyncio lock per
    storage and path, shared by every instance); on a `LocalBackend` (POSIX), processes take turns as well (an
    advisory `flock` on the backend's root directory; reads take it shared); and every write is a compare-and-swap
    on the file's version (read and hash, compute, re-read and compare right before writing, recompute on the new
    content, up to `CAS_ATTEMPTS` times), after which an appended entry is checked and written again if another
    writer overwrote it. Backends without a lock of their own (a remote store written by several processes) rely on
    the compare-and-swap alone, which narrows the race but cannot close it without an atomic write in the backend.

    Args:
        memory_dir: The directory of all agents' memories, a virtual path on the backend (`.pydantic-deep` is
            `/.pydantic-deep`).
        agent_name: This agent's subdirectory: a plain name (`"../x"` or `"a/b"` raise `ValueError`).
        backend: Where the file lives. `None`: a `LocalBackend` rooted at the current working directory, created
            when the memory is first used (not at construction), so `.pydantic-deep/main/MEMORY.md` is relative to
            where the agent runs.
        max_lines: How many lines of MEMORY.md the instructions show (0: none, only the line count).
    """

    memory_dir: str = ".pydantic-deep"
    agent_name: str = "main"
    backend: BackendProtocol | None = None
    max_lines: int = 200
    _path: str = field(init=False, repr=False)
    _resolved: BackendProtocol | None = field(default=None, init=False, repr=False)
    _toolset: FunctionToolset[Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        directory = _check_memory_dir(self.memory_dir)
        name = _check_agent_name(self.agent_name)
        if isinstance(self.max_lines, bool) or not isinstance(self.max_lines, int) or self.max_lines < 0:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"max_lines must be an int, 0 or more, got {self.max_lines!r}")
        if self.backend is not None and not isinstance(self.backend, BackendProtocol):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"backend must implement BackendProtocol (or be None), got {type(self.backend).__name__}")
        self._path = normalize_path(f"{directory}/{name}/{MEMORY_FILE}")
        self._resolved = self.backend
        toolset: FunctionToolset[Any] = FunctionToolset()
        toolset.add_function(self.read_memory, takes_ctx=False, name="read_memory")
        toolset.add_function(self.write_memory, takes_ctx=False, name="write_memory")
        toolset.add_function(self.update_memory, takes_ctx=False, name="update_memory")
        self._toolset = toolset

    @property
    def path(self) -> str:
        """The virtual path of MEMORY.md on the backend, e.g. `/.pydantic-deep/main/MEMORY.md`."""
        return self._path

    def get_backend(self) -> BackendProtocol:
        """The backend in use; with `backend=None`, a `LocalBackend` at the current directory, made on first call."""
        if self._resolved is None:
            self._resolved = LocalBackend(os.getcwd())
        return self._resolved

    # -- capability ----------------------------------------------------------------------------------------------------

    def get_toolset(self) -> FunctionToolset[Any]:
        return self._toolset

    def get_instructions(self) -> Callable[[RunContext[Any]], Any]:
        async def agent_memory(ctx: RunContext[Any]) -> str:
            return await self.render_instructions()

        return agent_memory

    async def render_instructions(self) -> str:
        """The `## Agent Memory` section as the model sees it in its instructions."""
        try:
            text = await self._load_locked()
        except (OSError, BackendError, _LockTimeout) as exc:
            return f"{_HEADING}\nMemory is unavailable: {self._describe(exc, 'read')}"
        lines = _lines(text or "")
        if not lines:
            return (
                f"{_HEADING}\nYour memory is empty. Save what is worth keeping across sessions (user preferences, "
                "project facts, decisions, lessons learned) with write_memory(content); it will appear here in "
                f"every future session. {_TOOLS_HINT}"
            )
        shown: list[str] = []
        used = 0
        for raw in lines[: self.max_lines]:
            line = _cut(raw, MAX_LINE_CHARS)
            if shown and used + len(line) + 1 > MAX_INSTRUCTION_CHARS:
                break
            shown.append(line)
            used += len(line) + 1
        parts = [
            f"{_HEADING}\nYour persistent memory ({self._path}, {_count(len(lines))}), kept across sessions and "
            f"compactions. {_TOOLS_HINT}"
        ]
        if shown:
            parts.append("\n".join(shown))
        rest = len(lines) - len(shown)
        if rest:
            parts.append(
                f"[{_count(rest, 'more line')} of memory not shown: call read_memory(offset={len(shown)}) to read them]"
            )
        return "\n\n".join(parts)

    # -- tools ---------------------------------------------------------------------------------------------------------

    async def read_memory(self, offset: int = 0, limit: int = READ_LIMIT) -> str:
        """Read your persistent memory (MEMORY.md): its text exactly as stored, to copy from into update_memory.

        Args:
            offset: lines to skip from the start (to read past what the instructions show).
            limit: lines to return at most.
        """
        if offset < 0:
            raise ToolFailed(f"offset must be 0 or more (the number of lines to skip), got {offset}")
        if limit < 1:
            raise ToolFailed(f"limit must be at least 1 (the number of lines to return), got {limit}")
        try:
            text = await self._load_locked()
        except (OSError, BackendError, _LockTimeout) as exc:
            raise ToolFailed(self._describe(exc, "read")) from exc
        lines = _lines(text or "")
        total = len(lines)
        if total == 0:
            return "Memory is empty. Call write_memory(content) to save something worth remembering."
        if offset >= total:
            raise ToolFailed(f"offset {offset} is past the end of memory, which has {total} lines")
        end = min(total, offset + limit)
        out: list[str] = []
        used = 0
        for index in range(offset, end):
            line = lines[index]
            if out and used + len(line) + 1 > MAX_READ_CHARS:
                end = index
                break
            if len(line) > MAX_READ_CHARS:
                line = line[:MAX_READ_CHARS] + f"… [line cut: {len(line) - MAX_READ_CHARS:,} more chars]"
            out.append(line)
            used += len(line) + 1
        body = "\n".join(out)
        if offset == 0 and end == total:
            return body
        note = f"[memory lines {offset + 1}-{end} of {total}"
        if end < total:
            note += f"; call read_memory(offset={end}) for the rest"
        return f"{body}\n\n{note}]"

    async def write_memory(self, content: str) -> str:
        """Append an entry to your persistent memory (MEMORY.md), which you will see in every future session.

        Save durable, reusable knowledge: user preferences, project facts and conventions, decisions, lessons.
        Keep entries short; Markdown headings and bullet lists are fine.

        Args:
            content: the text to append (a newline is added after it when missing).
        """
        if content.strip() == "":
            raise ToolFailed("content is empty: pass the text to remember")
        entry = content if content.endswith("\n") else content + "\n"

        def append(before: str | None) -> str:
            text = before or ""
            if text and not text.endswith("\n"):
                text += "\n"
            return text + entry

        def landed(before: str | None, now: str | None) -> bool:
            return now is not None and now.count(entry) > (before or "").count(entry)

        after = await self._modify(append, "write", landed)
        return f"Saved to memory ({_count(len(_lines(after)))} in {self._path})."

    async def update_memory(self, old_text: str, new_text: str) -> str:
        """Replace text in your persistent memory (MEMORY.md), to correct or remove an entry.

        old_text must occur exactly once: copy it exactly from the memory (call read_memory), with enough
        surrounding text to make it unique.

        Args:
            old_text: the exact text to replace.
            new_text: the replacement ('' removes old_text).
        """
        if old_text == "":
            raise ToolFailed("old_text is empty: copy the exact text to replace from your memory (call read_memory)")

        def replace(before: str | None) -> str:
            if before is None:
                raise ToolFailed(
                    "memory is empty (MEMORY.md does not exist yet): nothing to update; call write_memory to add to it"
                )
            count = before.count(old_text)
            if count == 0:
                raise ToolFailed(
                    "old_text was not found in memory: call read_memory and copy the exact text to replace, "
                    "including whitespace and line breaks"
                )
            if count > 1:
                raise ToolFailed(
                    f"old_text was found {count} times in memory: include more surrounding text so it matches "
                    "exactly once"
                )
            return before.replace(old_text, new_text, 1)

        after = await self._modify(replace, "update")
        return f"Memory updated ({_count(len(_lines(after)))} in {self._path})."

    # -- storage -------------------------------------------------------------------------------------------------------

    def _describe(self, exc: BaseException, action: str) -> str:
        if isinstance(exc, _LockTimeout):
            return (
                f"could not {action} memory at {self._path}: another process has held its lock for over "
                f"{PROCESS_LOCK_TIMEOUT:g} s. Try again later."
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
        return f"could not {action} memory at {self._path}: {reason}. This is a problem of the storage; tell the user."

    async def _load(self, backend: BackendProtocol) -> str | None:
        """The file's text, or None while it does not exist."""
        try:
            return await backend.read(self._path)
        except FileNotFoundError:
            return None

    async def _load_locked(self) -> str | None:
        backend = self.get_backend()
        async with _guard(backend, self._path, shared=True):
            return await self._load(backend)

    async def _modify(
        self,
        change: Callable[[str | None], str],
        action: str,
        landed: Callable[[str | None, str | None], bool] | None = None,
    ) -> str:
        """Apply `change` to the file's content as a compare-and-swap, retried while other writers interfere.

        `change` raises `ToolFailed` when it does not apply. `landed(before, now)` checks after the write that it
        was not overwritten by a writer in another process; if it was, the change is made again.
        """
        backend = self.get_backend()
        try:
            async with _guard(backend, self._path):
                for attempt in range(CAS_ATTEMPTS):
                    before = await self._load(backend)
                    after = change(before)
                    if _version(await self._load(backend)) == _version(before):
                        await backend.write(self._path, after)
                        if landed is None or landed(before, await self._load(backend)):
                            return after
                    await asyncio.sleep(random.uniform(0.001, 0.005) * (attempt + 1))
        except (OSError, BackendError, _LockTimeout) as exc:
            raise ToolFailed(self._describe(exc, action)) from exc
        raise ToolFailed(
            f"memory at {self._path} kept changing while saving ({CAS_ATTEMPTS} attempts; another writer is busy "
            "with it): call the tool again"
        )
