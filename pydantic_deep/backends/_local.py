"""`LocalBackend`: a directory on disk seen as a virtual file system that nothing can leave.

```python
import asyncio
from pydantic_deep.backends import LocalBackend, PathEscapeError

fs = LocalBackend("workspace")                    # created if missing
asyncio.run(fs.write("/src/app.py", "print('hi')\\n"))
assert open("workspace/src/app.py").read() == "print('hi')\\n"
try:
    asyncio.run(fs.read("../../etc/passwd"))
except PathEscapeError as exc:
    print(exc)                                    # '../../etc/passwd' climbs above the root
```
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from ._grep import GREP_TIME_LIMIT, GrepBudget, compile_grep_pattern, grep_lines, grep_path_matches
from ._host import check_regular as _check_regular
from ._host import open_regular, read_regular, write_atomic
from ._host import translate as _translate
from ._names import escape_name, unescape_name
from ._pages import FilePage, read_page_from
from ._protocol import (
    BINARY_SNIFF_CHARS,
    BackendError,
    FileInfo,
    GrepMatch,
    PathEscapeError,
    apply_edit,
    match_glob,
    normalize_path,
)

__all__ = ["LocalBackend"]

_T = TypeVar("_T")


class LocalBackend:
    """A `BackendProtocol` over the directory `root`; virtual `/` is `root` (created if missing).

    Every path is normalized (`normalize_path`: `..` may not climb above `/`; NUL bytes, backslashes and over-long
    names are refused), mapped under `root`, resolved with `os.path.realpath` and must stay inside the real root.
    So a symlink inside the root that points inside it works, and one that leads out raises `PathEscapeError`, for
    reads and writes alike (a write checks its parent directory's real path and refuses a final-component symlink
    pointing out; files are opened with `O_NOFOLLOW`). `ls`, `glob` and `grep` skip entries that resolve outside the
    root and do not descend into symlinked directories. Only regular files are read, edited or overwritten: a FIFO,
    socket or device is refused at once (checked before opening, and opened with `O_NONBLOCK`), never waited on.

    File names are bytes on disk; virtual paths spell them escaped (`escape_name`: an undecodable byte as `\\xHH`, a
    backslash as `\\\\`), so every name can be listed, serialized and passed back. Files are UTF-8 text: undecodable
    bytes are replaced on `read`/`read_page` and kept as they are by `edit`; `grep` skips files with a NUL byte near
    the start (binary) and is bounded in time (`GrepBudget`). Writes are atomic (a temporary file, then `os.replace`;
    the file's mode is kept), and writes and edits on one backend are serialized, so concurrent edits lose nothing.
    All file I/O runs in a worker thread.

    The checks defend against paths a model (or a user) passes in; they do not make the root safe from another local
    process racing to swap directories for symlinks while a call is in flight.
    """

    def __init__(self, root: str | os.PathLike[str], *, grep_time_limit: float = GREP_TIME_LIMIT) -> None:
        os.makedirs(root, exist_ok=True)
        self._root = os.path.realpath(root)
        if not os.path.isdir(self._root):
            raise NotADirectoryError(f"LocalBackend root {str(root)!r} is not a directory: pass a directory path")
        self._prefix = self._root.rstrip(os.sep) + os.sep
        self._lock = threading.Lock()  # serializes writes, edits and deletes (edit is read-modify-write)
        self.grep_time_limit = grep_time_limit
        """Seconds a `grep` may take in all (see `GrepBudget` for the bounds on slow patterns)."""

    @property
    def root(self) -> Path:
        """The real (symlink-free) path of the root directory on disk."""
        return Path(self._root)

    def __repr__(self) -> str:
        return f"LocalBackend({self._root!r})"

    # -- path resolution -----------------------------------------------------------------------------------------------

    def _inside(self, real: str) -> bool:
        return real == self._root or real.startswith(self._prefix)

    def _host(self, vpath: str) -> str:
        if vpath == "/":
            return self._root
        if "\\" not in vpath:
            return os.path.join(self._root, *vpath[1:].split("/"))
        names = [os.fsdecode(unescape_name(name)) for name in vpath[1:].split("/")]
        if os.altsep is not None and any(os.sep in n or os.altsep in n for n in names):  # pragma: no cover - Windows
            raise PathEscapeError(f"{vpath}: a backslash cannot be part of a file name on this system")
        return os.path.join(self._root, *names)

    def _resolve(self, path: str) -> tuple[str, str]:
        """(virtual path, real host path inside the root) for `path`, or `PathEscapeError`."""
        vpath = normalize_path(path)
        real = os.path.realpath(self._host(vpath))
        if not self._inside(real):
            raise PathEscapeError(f"{vpath} leads outside the root through a symlink: use a path inside the workspace")
        return vpath, real

    async def _run(self, func: Callable[[], _T], vpath_hint: str) -> _T:
        try:
            return await anyio.to_thread.run_sync(func)
        except (PathEscapeError, BackendError):
            raise
        except OSError as exc:
            raise _translate(exc, vpath_hint) from None

    # -- BackendProtocol -----------------------------------------------------------------------------------------------

    async def read(self, path: str) -> str:
        def read() -> str:
            vpath, real = self._resolve(path)
            return read_regular(vpath, real).decode("utf-8", "replace")

        return await self._run(read, path)

    async def write(self, path: str, content: str) -> None:
        data = content.encode("utf-8", "surrogateescape")

        def write() -> None:
            vpath, real = self._resolve_for_write(path)
            with self._lock:
                write_atomic(self._root, vpath, real, data)

        await self._run(write, path)

    async def read_page(self, path: str, offset: int, limit: int, *, max_line_chars: int, max_chars: int) -> FilePage:
        """Lines `offset+1 … offset+limit` of a file, streamed: only the page (and a bounded lookahead) is read."""

        def read_page() -> FilePage:
            vpath, real = self._resolve(path)
            fd = open_regular(vpath, real)
            size = os.fstat(fd).st_size
            with os.fdopen(fd, "rb") as file:
                return read_page_from(
                    file, offset, limit, max_line_chars=max_line_chars, max_chars=max_chars, size=size
                )

        return await self._run(read_page, path)

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        def edit() -> int:
            vpath, real = self._resolve(path)
            with self._lock:
                text = read_regular(vpath, real).decode("utf-8", "surrogateescape")  # every byte comes back
                result, count = apply_edit(text, old, new, path=vpath, replace_all=replace_all)
                write_atomic(self._root, vpath, real, result.encode("utf-8", "surrogateescape"))
            return count

        return await self._run(edit, path)

    async def ls(self, path: str = "/") -> list[FileInfo]:
        def ls() -> list[FileInfo]:
            vpath, real = self._resolve_dir(path)
            base = vpath.rstrip("/") + "/"
            entries: list[FileInfo] = []
            with os.scandir(real) as it:
                for entry in it:
                    info = self._entry_info(base + escape_name(entry.name), os.path.join(real, entry.name))
                    if info is not None:
                        entries.append(info)
            return sorted(entries, key=lambda e: e.path)

        return await self._run(ls, path)

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        def glob() -> list[str]:
            vpath, real = self._resolve_dir(path)
            return [v for v, _ in self._walk_files(vpath, real) if match_glob(pattern, v, vpath)]

        return await self._run(glob, path)

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        ignore_case: bool = False,
        max_results: int = 200,
    ) -> list[GrepMatch]:
        compiled = compile_grep_pattern(pattern, ignore_case=ignore_case)
        budget = GrepBudget(time_limit=self.grep_time_limit)

        def grep() -> list[GrepMatch]:
            vpath, real = self._resolve(path)
            if os.path.isdir(real):
                files, base = self._walk_files(vpath, real), vpath
            else:
                _check_regular(os.stat(real).st_mode, vpath)  # missing, or a FIFO/socket/device: say so
                files, base = [(vpath, real)], vpath.rsplit("/", 1)[0] or "/"
            matches: list[GrepMatch] = []
            for file_vpath, file_real in files:
                if len(matches) >= max_results or budget.expired():
                    break
                if not grep_path_matches(glob, file_vpath, base):
                    continue
                try:
                    data = read_regular(file_vpath, file_real)
                except (OSError, BackendError):
                    continue  # unreadable, vanished or no longer a regular file: skip, like grep -s
                if b"\x00" in data[:BINARY_SNIFF_CHARS]:
                    continue
                text = data.decode("utf-8", "replace")
                matches.extend(grep_lines(compiled, file_vpath, text, max_results - len(matches), budget=budget))
            budget.raise_if_stopped(matches)
            return matches

        return await self._run(grep, path)

    async def delete(self, path: str) -> None:
        def delete() -> None:
            vpath = normalize_path(path)
            if vpath == "/":
                raise IsADirectoryError(errno.EISDIR, "Is a directory", vpath)
            _, real = self._resolve(path)  # the target (if a symlink) must be inside too
            host = os.path.join(self._real_parent(vpath), os.path.basename(self._host(vpath)))
            if stat_module.S_ISDIR(os.lstat(host).st_mode) or os.path.isdir(real):
                raise IsADirectoryError(errno.EISDIR, "Is a directory", vpath)
            os.unlink(host)  # a symlink is removed itself, never its target

        await self._run(delete, path)

    async def exists(self, path: str) -> bool:
        def exists() -> bool:
            return os.path.exists(self._resolve(path)[1])

        return await self._run(exists, path)

    async def stat(self, path: str) -> FileInfo:
        def stat() -> FileInfo:
            vpath, real = self._resolve(path)
            st = os.stat(real)
            is_dir = stat_module.S_ISDIR(st.st_mode)
            return FileInfo(vpath, is_dir, 0 if is_dir else st.st_size, st.st_mtime)

        return await self._run(stat, path)

    # -- helpers (run in the worker thread) ----------------------------------------------------------------------------

    def _real_parent(self, vpath: str) -> str:
        parent = os.path.realpath(self._host(vpath.rsplit("/", 1)[0] or "/"))
        if not self._inside(parent):
            raise PathEscapeError(f"{vpath} leads outside the root through a symlink: use a path inside the workspace")
        return parent

    def _resolve_for_write(self, path: str) -> tuple[str, str]:
        vpath = normalize_path(path)
        if vpath == "/":
            raise IsADirectoryError(errno.EISDIR, "Is a directory", vpath)
        self._real_parent(vpath)
        return self._resolve(vpath)  # a final-component symlink must point inside the root as well

    def _resolve_dir(self, path: str) -> tuple[str, str]:
        vpath, real = self._resolve(path)
        if not os.path.isdir(real):
            if os.path.exists(real):
                raise NotADirectoryError(errno.ENOTDIR, "Not a directory", vpath)
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", vpath)
        return vpath, real

    def _entry_info(self, vpath: str, host: str) -> FileInfo | None:
        """`FileInfo` for a directory entry, or None when it resolves outside the root or dangles."""
        real = os.path.realpath(host)
        if not self._inside(real):
            return None
        try:
            st = os.stat(real)
        except OSError:
            return None
        is_dir = stat_module.S_ISDIR(st.st_mode)
        return FileInfo(vpath, is_dir, 0 if is_dir else st.st_size, st.st_mtime)

    def _walk_files(self, vpath: str, real: str) -> list[tuple[str, str]]:
        """(virtual path, real path) of every regular file under a directory, sorted by virtual path.

        Iterative (a tree may be ~2,000 levels deep within the 4,096-byte path limit); symlinked directories are not
        entered and files resolving outside the root are skipped.
        """
        found: list[tuple[str, str]] = []
        pending = [(vpath.rstrip("/") + "/", real)]
        while pending:
            base, directory = pending.pop()
            try:
                with os.scandir(directory) as it:
                    entries = list(it)
            except OSError:
                continue  # vanished or unreadable meanwhile
            for entry in entries:
                child_v, child_host = base + escape_name(entry.name), os.path.join(directory, entry.name)
                if entry.is_dir(follow_symlinks=False):
                    pending.append((child_v + "/", child_host))
                    continue
                child_real = os.path.realpath(child_host)
                if self._inside(child_real) and os.path.isfile(child_real):
                    found.append((child_v, child_real))
        return sorted(found)
