"""`AgentMemoryToolset`: a MEMORY.md file the agent reads in its instructions and edits with three tools.

The memory is a file on a backend, not part of the message history: compaction cannot touch it and a new session (a
new agent, a new process) sees it again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import FunctionToolset, RunContext, ToolFailed
from pydantic_ai.capabilities import AbstractCapability

from ..backends import BackendProtocol, count_occurrences
from ..storage._protocols import MemoryStore
from ._cas import CAS_ATTEMPTS, STORAGE_ERRORS, describe, load_locked, modify
from ._storage import (
    DEFAULT_AGENT_NAME,
    MEMORY_FILE,
    MemoryLocation,
    check_agent_name,
    check_memory_dir,
    memory_path,
)
from ._text import (
    MAX_INSTRUCTION_CHARS,
    MAX_LINE_CHARS,
    MAX_READ_CHARS,
    READ_LIMIT,
    count,
    instructions,
    lines_of,
    page,
)

__all__ = [
    "CAS_ATTEMPTS",
    "MAX_INSTRUCTION_CHARS",
    "MAX_LINE_CHARS",
    "MAX_READ_CHARS",
    "MEMORY_FILE",
    "READ_LIMIT",
    "AgentMemoryToolset",
]


@dataclass
class AgentMemoryToolset(AbstractCapability[Any]):
    """Persistent agent memory in a MEMORY.md file, as a pydantic-ai capability.

    Add it to an agent with `Agent(..., capabilities=[AgentMemoryToolset()])` (or `create_deep_agent(memory=...)`).
    It contributes:

    - an `## Agent Memory` section of the instructions, rebuilt for every model request: the first `max_lines`
      lines of MEMORY.md, a note saying how many more lines there are (call `read_memory` for them), or, while the
      file does not exist, a short note that memory is empty and how to write it;
    - the tools `read_memory(offset=0, limit=1000)` (the file's text as it is, no line numbers, so it can be copied
      into `update_memory`; paged), `write_memory(content)` (appends an entry, creating the file and its
      directories) and `update_memory(old_text, new_text)` (`old_text` must occur exactly once).

    Where the file lives, decided for every run from the arguments and the run's deps:

    1. `backend` given: `{memory_dir}/{agent_name}/MEMORY.md` on it;
    2. else, deps with a `base_dir` (`DeepAgentDeps`, unless `base_dir=None`): on disk,
       `<base_dir>/<agent_name>/MEMORY.md`, the session layout (`memory_dir` does not apply);
    3. else, deps with a `backend`: `{memory_dir}/{agent_name}/MEMORY.md` on the run's backend;
    4. else (no run, or plain deps): `{memory_dir}/{agent_name}/MEMORY.md` under the current directory.

    `agent_name=None` takes the deps' `agent_name` when they have one, else `"main"`.

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
        agent_name: This agent's subdirectory: a plain name (`"../x"` or `"a/b"` raise `ValueError`); `None` for the
            deps' `agent_name`, else `"main"`.
        backend: Where the file lives; `None` to decide per run (see above).
        max_lines: How many lines of MEMORY.md the instructions show (0: none, only the line count).
    """

    memory_dir: str = ".pydantic-deep"
    agent_name: str | None = None
    backend: BackendProtocol | None = None
    max_lines: int = 200
    store: MemoryStore | None = None
    """Keep the memory in this store (e.g. `open_storage('sqlite:///agents.db').memory`), under the agent's name,
    instead of a file; writers still never lose each other's edits (the store's compare-and-swap)."""
    _directory: str = field(init=False, repr=False)
    _toolset: FunctionToolset[Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._directory = check_memory_dir(self.memory_dir)
        if self.agent_name is not None:
            check_agent_name(self.agent_name)
        if isinstance(self.max_lines, bool) or not isinstance(self.max_lines, int) or self.max_lines < 0:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"max_lines must be an int, 0 or more, got {self.max_lines!r}")
        if self.backend is not None and not isinstance(self.backend, BackendProtocol):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"backend must implement BackendProtocol (or be None), got {type(self.backend).__name__}")
        toolset: FunctionToolset[Any] = FunctionToolset()
        toolset.add_function(self._read_tool, takes_ctx=True, name="read_memory")
        toolset.add_function(self._write_tool, takes_ctx=True, name="write_memory")
        toolset.add_function(self._update_tool, takes_ctx=True, name="update_memory")
        self._toolset = toolset

    @property
    def path(self) -> str:
        """The virtual path of MEMORY.md outside a run (on `backend`, or under the current directory), e.g.
        `/.pydantic-deep/main/MEMORY.md`; in a run, `locate(deps).path`."""
        return memory_path(self._directory, self.agent_name or DEFAULT_AGENT_NAME)

    def locate(self, deps: Any = None) -> MemoryLocation:
        """Where the memory file is for a run with these deps (`None`: outside a run). See the class docstring."""
        name = self.agent_name
        if name is None:
            from_deps = getattr(deps, "agent_name", None)
            name = DEFAULT_AGENT_NAME if from_deps is None else check_agent_name(from_deps, "deps.agent_name")
        if self.store is not None:
            return MemoryLocation(f"MEMORY.md of {name!r} in {self.store.url}", store=self.store, agent_name=name)
        if self.backend is not None:
            return MemoryLocation(memory_path(self._directory, name), backend=self.backend)
        base_dir = getattr(deps, "base_dir", None)
        if base_dir is not None:
            return MemoryLocation(memory_path("/", name), directory=os.path.abspath(base_dir))
        run_backend = getattr(deps, "backend", None)
        if isinstance(run_backend, BackendProtocol):
            return MemoryLocation(memory_path(self._directory, name), backend=run_backend)
        return MemoryLocation(memory_path(self._directory, name), directory=os.getcwd())

    def get_backend(self, deps: Any = None) -> BackendProtocol:
        """The backend holding the memory file for these deps (see `locate`); a `LocalBackend` when on disk."""
        backend = self.locate(deps).open(create=True)
        assert backend is not None
        return backend

    # -- capability ----------------------------------------------------------------------------------------------------

    def get_toolset(self) -> FunctionToolset[Any]:
        return self._toolset

    def get_instructions(self) -> Callable[[RunContext[Any]], Any]:
        async def agent_memory(ctx: RunContext[Any]) -> str:
            return await self.render_instructions(ctx.deps)

        return agent_memory

    async def render_instructions(self, deps: Any = None) -> str:
        """The `## Agent Memory` section as the model sees it in its instructions (for a run with `deps`)."""
        where: MemoryLocation | None = None
        try:
            where = self.locate(deps)
            text = await load_locked(where)
        except STORAGE_ERRORS as exc:
            return f"## Agent Memory\nMemory is unavailable: {describe(exc, 'read', where)}"
        return instructions(text or "", where.path, self.max_lines)

    # -- tools (as the model calls them) -------------------------------------------------------------------------------

    async def _read_tool(self, ctx: RunContext[Any], offset: int = 0, limit: int = READ_LIMIT) -> str:
        """Read your persistent memory (MEMORY.md): its text exactly as stored, to copy from into update_memory.

        Args:
            offset: lines to skip from the start (to read past what the instructions show).
            limit: lines to return at most.
        """
        return await self._read(ctx.deps, offset, limit)

    async def _write_tool(self, ctx: RunContext[Any], content: str) -> str:
        """Append an entry to your persistent memory (MEMORY.md), which you will see in every future session.

        Save durable, reusable knowledge: user preferences, project facts and conventions, decisions, lessons.
        Keep entries short; Markdown headings and bullet lists are fine.

        Args:
            content: the text to append (a newline is added after it when missing).
        """
        return await self._write(ctx.deps, content)

    async def _update_tool(self, ctx: RunContext[Any], old_text: str, new_text: str) -> str:
        """Replace text in your persistent memory (MEMORY.md), to correct or remove an entry.

        old_text must occur exactly once: copy it exactly from the memory (call read_memory), with enough
        surrounding text to make it unique.

        Args:
            old_text: the exact text to replace.
            new_text: the replacement ('' removes old_text).
        """
        return await self._update(ctx.deps, old_text, new_text)

    # -- the same, as plain methods (outside a run: on `backend`, or under the current directory) ----------------------

    async def read_memory(self, offset: int = 0, limit: int = READ_LIMIT) -> str:
        """The `read_memory` tool outside a run; failures raise `ToolFailed`."""
        return await self._read(None, offset, limit)

    async def write_memory(self, content: str) -> str:
        """The `write_memory` tool outside a run; failures raise `ToolFailed`."""
        return await self._write(None, content)

    async def update_memory(self, old_text: str, new_text: str) -> str:
        """The `update_memory` tool outside a run; failures raise `ToolFailed`."""
        return await self._update(None, old_text, new_text)

    async def _read(self, deps: Any, offset: int, limit: int) -> str:
        if offset < 0:
            raise ToolFailed(f"offset must be 0 or more (the number of lines to skip), got {offset}")
        if limit < 1:
            raise ToolFailed(f"limit must be at least 1 (the number of lines to return), got {limit}")
        where: MemoryLocation | None = None
        try:
            where = self.locate(deps)
            text = await load_locked(where)
        except STORAGE_ERRORS as exc:
            raise ToolFailed(describe(exc, "read", where)) from exc
        return page(text or "", offset, limit)

    async def _write(self, deps: Any, content: str) -> str:
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

        after, where = await modify(lambda: self.locate(deps), append, "write", landed)
        return f"Saved to memory ({count(len(lines_of(after)))} in {where.path})."

    async def _update(self, deps: Any, old_text: str, new_text: str) -> str:
        if old_text == "":
            raise ToolFailed("old_text is empty: copy the exact text to replace from your memory (call read_memory)")

        def replace(before: str | None) -> str:
            if before is None:
                raise ToolFailed(
                    "memory is empty (MEMORY.md does not exist yet): nothing to update; call write_memory to add to it"
                )
            found = count_occurrences(before, old_text)
            if found == 0:
                raise ToolFailed(
                    "old_text was not found in memory: call read_memory and copy the exact text to replace, "
                    "including whitespace and line breaks"
                )
            if found > 1:
                overlap = " (some occurrences overlap)" if found > before.count(old_text) else ""
                raise ToolFailed(
                    f"old_text was found {found} times in memory{overlap}: include more surrounding text so it "
                    "matches exactly once"
                )
            return before.replace(old_text, new_text, 1)

        after, where = await modify(lambda: self.locate(deps), replace, "update")
        return f"Memory updated ({count(len(lines_of(after)))} in {where.path})."
