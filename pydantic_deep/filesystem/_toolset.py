"""`FilesystemToolset`: `ls`, `read_file`, `write_file`, `edit_file`, `glob` and `grep` over the run's backend."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai import FunctionToolset, RunContext, ToolFailed

from ..backends import (
    BackendError,
    BackendProtocol,
    GrepStopped,
    PathEscapeError,
    SupportsReadPage,
    normalize_path,
    text_page,
)
from ..backends._names import shown_text
from ._format import (
    DEFAULT_READ_LIMIT,
    MAX_ENTRIES,
    MAX_LINE_CHARS,
    MAX_OUTPUT_CHARS,
    check_page,
    format_grep,
    format_ls,
    format_page,
)
from ._hidden import DEFAULT_HIDDEN_DIRS, HiddenDirs

__all__ = ["FilesystemToolset", "describe_error", "resolve_backend"]

_NO_BACKEND = (
    "No file system is configured for this run: give the run deps a `backend` attribute (e.g. DeepAgentDeps) "
    "or pass FilesystemToolset(backend=...)."
)


def resolve_backend(ctx: RunContext[Any], default: BackendProtocol | None = None) -> BackendProtocol:
    """The run's backend: `ctx.deps.backend` when the deps have a (non-None) `backend`, else `default`.

    Raises `ToolFailed` (a tool failure the model sees) when there is neither.
    """
    backend: BackendProtocol | None = getattr(ctx.deps, "backend", None)
    if backend is not None:
        return backend
    if default is not None:
        return default
    raise ToolFailed(_NO_BACKEND)


def _shown(path: str) -> str:
    try:
        return normalize_path(path)
    except PathEscapeError:
        return shown_text(path)


def describe_error(exc: Exception, path: str) -> str:
    """A message for the model about a failed file operation on `path`, saying what to do next."""
    shown = _shown(path)
    if isinstance(exc, PathEscapeError):
        return (
            f"Access denied for {shown}: {exc}. Paths are virtual: '/' is the root of this file system; use paths "
            "inside it (no '..' above '/', no backslashes, no symlinks leading out)."
        )
    if isinstance(exc, FileNotFoundError):
        return f"{shown} does not exist. Call ls or glob to find the right path."
    if isinstance(exc, IsADirectoryError):
        return f"{shown} is a directory, not a file. Call ls({json.dumps(shown)}) to see what is inside it."
    if isinstance(exc, NotADirectoryError):
        return f"{shown} (or one of its parents) is a file, not a directory. Call read_file to read a file."
    if isinstance(exc, BackendError | ValueError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{shown}: {exc.strerror or exc}."
    return f"{shown}: {exc}"  # pragma: no cover - only OSError/BackendError/ValueError are caught


class FilesystemToolset(FunctionToolset[Any]):
    """A `FunctionToolset` subclass with the tools `ls`, `read_file`, `write_file`, `edit_file`, `glob` and `grep`.

    The backend comes from the run: `ctx.deps.backend` when the deps have one, else the `backend` given here; with
    neither, the tools fail with a message saying so. Every file error (a path escaping the root, a missing file, a
    directory where a file is expected, an edit that does not match once, an invalid regex) is reported to the
    model as a failed tool call (`ToolFailed`): the run goes on, the model sees what went wrong and what to do, and
    no retry budget is used.

    ```python
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel
    from pydantic_deep.backends import StateBackend
    from pydantic_deep.filesystem import FilesystemToolset

    agent = Agent(TestModel(), toolsets=[FilesystemToolset(backend=StateBackend({"/notes.md": "hello"}))])
    ```

    Args:
        backend: The backend used when the run's deps have no `backend`.
        read_limit: Default `limit` of `read_file` (lines per page).
        max_line_chars: Lines longer than this are cut in `read_file` and `grep` output.
        max_output_chars: `read_file` stops early (with a paging hint) once its output would exceed this.
        max_grep_results: Matches `grep` returns at most.
        max_entries: Entries `ls` and `glob` return at most.
        hidden_dirs: Directories `ls`, `glob` and `grep` leave out unless the path given is inside one (then they
            work as usual); `read_file` reads them like any other. Default: the eviction archive,
            `/large_tool_results/`, which previews point into but which is not part of the project.
        **kwargs: Passed to `FunctionToolset` (`id`, `max_retries`, `timeout`, ...).
    """

    def __init__(
        self,
        backend: BackendProtocol | None = None,
        *,
        read_limit: int = DEFAULT_READ_LIMIT,
        max_line_chars: int = MAX_LINE_CHARS,
        max_output_chars: int = MAX_OUTPUT_CHARS,
        max_grep_results: int = 200,
        max_entries: int = MAX_ENTRIES,
        hidden_dirs: Sequence[str] = DEFAULT_HIDDEN_DIRS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._hidden = HiddenDirs(hidden_dirs)
        self.hidden_dirs = self._hidden.dirs
        self.backend = backend
        self.read_limit = read_limit
        self.max_line_chars = max_line_chars
        self.max_output_chars = max_output_chars
        self.max_grep_results = max_grep_results
        self.max_entries = max_entries
        self.add_function(self._ls, takes_ctx=True, name="ls")
        self.add_function(self._read_file, takes_ctx=True, name="read_file")
        self.add_function(self._write_file, takes_ctx=True, name="write_file")
        self.add_function(self._edit_file, takes_ctx=True, name="edit_file")
        self.add_function(self._glob, takes_ctx=True, name="glob")
        self.add_function(self._grep, takes_ctx=True, name="grep")

    async def _ls(self, ctx: RunContext[Any], path: str = "/") -> str:
        """List the files and directories directly inside a directory of the virtual file system.

        Args:
            path: The directory, e.g. "/" (the root) or "/src".
        """
        backend = resolve_backend(ctx, self.backend)
        try:
            entries = self._hidden.visible_entries(await backend.ls(path), normalize_path(path))
        except (OSError, BackendError, ValueError) as exc:
            raise ToolFailed(describe_error(exc, path)) from exc
        return format_ls(entries, _shown(path), max_entries=self.max_entries)

    async def _read_file(self, ctx: RunContext[Any], path: str, offset: int = 0, limit: int | None = None) -> str:
        """Read a text file, with 1-based line numbers. Long files come in pages: the output ends with the call
        that reads the next page.

        Args:
            path: The file, e.g. "/src/app.py".
            offset: How many lines to skip from the start (0 reads from line 1).
            limit: How many lines to return (default 2000).
        """
        backend = resolve_backend(ctx, self.backend)
        limit = self.read_limit if limit is None else limit
        try:
            check_page(offset, limit)
            vpath = normalize_path(path)
            sizes = {"max_line_chars": self.max_line_chars, "max_chars": self.max_output_chars}
            if isinstance(backend, SupportsReadPage):
                page = await backend.read_page(vpath, offset, limit, **sizes)
            else:
                page = text_page(await backend.read(vpath), offset, limit, **sizes)
            return format_page(page, vpath, limit, max_output_chars=self.max_output_chars)
        except (OSError, BackendError, ValueError) as exc:
            raise ToolFailed(describe_error(exc, path)) from exc

    async def _write_file(self, ctx: RunContext[Any], path: str, content: str) -> str:
        """Create a file, or overwrite it, with the given content (parent directories are created).

        Args:
            path: The file, e.g. "/notes/plan.md".
            content: The complete new content of the file.
        """
        backend = resolve_backend(ctx, self.backend)
        try:
            await backend.write(path, content)
        except (OSError, BackendError, ValueError) as exc:
            raise ToolFailed(describe_error(exc, path)) from exc
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return f"Wrote {_shown(path)} ({lines} lines, {len(content.encode('utf-8', 'surrogatepass')):,} bytes)."

    async def _edit_file(
        self, ctx: RunContext[Any], path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> str:
        """Replace exact text in a file. `old_string` must match exactly once (copy it from read_file output,
        without the line numbers, including indentation), unless `replace_all` is true.

        Args:
            path: The file to edit.
            old_string: The exact text to replace.
            new_string: The text to put in its place.
            replace_all: Replace every occurrence instead of requiring exactly one.
        """
        backend = resolve_backend(ctx, self.backend)
        try:
            count = await backend.edit(path, old_string, new_string, replace_all=replace_all)
        except (OSError, BackendError, ValueError) as exc:
            raise ToolFailed(describe_error(exc, path)) from exc
        return f"Edited {_shown(path)}: replaced {count} occurrence{'s' if count != 1 else ''}."

    async def _glob(self, ctx: RunContext[Any], pattern: str, path: str = "/") -> str:
        """Find files by name pattern: `*` matches within one directory, `**` any number of directories.

        Args:
            pattern: e.g. "**/*.py" (any depth), "*.md" (directly in `path`), "src/**/test_*.py".
            path: The directory to search from.
        """
        backend = resolve_backend(ctx, self.backend)
        try:
            found = self._hidden.visible(await backend.glob(pattern, path), normalize_path(path))
        except (OSError, BackendError, ValueError) as exc:
            raise ToolFailed(describe_error(exc, path)) from exc
        if not found:
            return f"No files under {_shown(path)} match {pattern!r}."
        lines = found[: self.max_entries]
        if len(found) > self.max_entries:
            lines.append(f"... and {len(found) - self.max_entries} more: narrow the pattern or path")
        return "\n".join(lines)

    async def _grep(
        self, ctx: RunContext[Any], pattern: str, path: str = "/", glob: str | None = None, ignore_case: bool = False
    ) -> str:
        """Search file contents with a regular expression (Python `re` syntax); prints `path:line: text`.

        Args:
            pattern: The regular expression, e.g. "def \\w+_handler" or "TODO".
            path: The directory (or file) to search.
            glob: Only search files matching this, e.g. "*.py" (by name, any depth) or "src/**/*.ts".
            ignore_case: Match regardless of case.
        """
        backend = resolve_backend(ctx, self.backend)
        stopped: str | None = None
        try:
            limit = self.max_grep_results + 1
            matches = await self._hidden.grep(
                backend, pattern, normalize_path(path), glob=glob, ignore_case=ignore_case, max_results=limit
            )
        except GrepStopped as exc:
            matches, stopped = exc.matches, str(exc)
        except (OSError, BackendError, ValueError) as exc:
            raise ToolFailed(describe_error(exc, path)) from exc
        capped = len(matches) > self.max_grep_results
        shown = format_grep(matches[: self.max_grep_results], capped, max_line_chars=self.max_line_chars)
        if stopped is not None:
            return f"{shown}\n({stopped})" if matches else f"No matches found before the search stopped. ({stopped})"
        if not matches:
            return f"No matches for {pattern!r} under {_shown(path)}."
        return shown
