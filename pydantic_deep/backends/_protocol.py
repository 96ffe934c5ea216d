"""The backend protocol: an async virtual file system the harness and its tools work through.

Paths are virtual and absolute: `/` is the backend's root, so `/large_tool_results/x` and `large_tool_results/x`
name the same file. A path that would leave the root (`..` above it, a symlink leading out, a NUL byte, an
over-long name) raises `PathEscapeError`, a `PermissionError`, which the file tools turn into a tool error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Protocol, runtime_checkable

__all__ = [
    "BINARY_SNIFF_CHARS",
    "MAX_COMPONENT_BYTES",
    "MAX_PATH_BYTES",
    "BackendError",
    "BackendProtocol",
    "EditError",
    "FileInfo",
    "GrepMatch",
    "PathEscapeError",
    "apply_edit",
    "compile_grep_pattern",
    "grep_lines",
    "grep_path_matches",
    "match_glob",
    "normalize_path",
]

MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 4_096
BINARY_SNIFF_CHARS = 8_192
"""`grep` skips a file with a NUL byte among its first this many bytes (or characters): it is treated as binary."""


class BackendError(Exception):
    """A backend operation failed (the message says why and what to do)."""


class PathEscapeError(PermissionError):
    """A path leaves the backend's root, or is not a path at all (NUL byte, over-long, bad separator)."""


class EditError(BackendError, ValueError):
    """`edit` found the text to replace zero times, or more than once without `replace_all`."""


@dataclass(frozen=True)
class FileInfo:
    """One entry of `ls`/`stat`: a virtual absolute path, whether it is a directory, its size and mtime."""

    path: str
    is_dir: bool
    size: int
    modified: float
    """Seconds since the epoch."""


@dataclass(frozen=True)
class GrepMatch:
    path: str
    line_number: int
    """1-based."""
    line: str


def normalize_path(path: str) -> str:
    """The canonical virtual path (`/a/b`) of `path`, or `PathEscapeError`.

    `.` and empty components are dropped and `..` goes up one level, but never above the root. Backslashes are
    refused rather than guessed at (on POSIX they are file-name characters, on Windows separators).
    """
    if not isinstance(path, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise PathEscapeError(f"a path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise PathEscapeError("a path may not contain a NUL byte")
    if "\\" in path:
        raise PathEscapeError(f"use '/' as the path separator: {path!r}")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise PathEscapeError(f"path longer than {MAX_PATH_BYTES} bytes")
    parts: list[str] = []
    for component in path.split("/"):
        if component in ("", "."):
            continue
        if component == "..":
            if not parts:
                raise PathEscapeError(f"{path!r} climbs above the root")
            parts.pop()
            continue
        if len(component.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES:
            raise PathEscapeError(f"a path component is longer than {MAX_COMPONENT_BYTES} bytes")
        parts.append(component)
    return "/" + "/".join(parts)


@runtime_checkable
class BackendProtocol(Protocol):
    """What every backend implements. All paths are virtual (see `normalize_path`); all methods are async.

    Missing files raise `FileNotFoundError`; directories where a file is expected raise `IsADirectoryError`.
    """

    async def read(self, path: str) -> str:
        """The file's text (UTF-8; undecodable bytes replaced)."""
        ...

    async def write(self, path: str, content: str) -> None:
        """Create or overwrite a file, creating its parent directories."""
        ...

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        """Replace `old` by `new`; it must occur exactly once unless `replace_all`. Returns the replacements made."""
        ...

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """The entries directly inside a directory, sorted by path."""
        ...

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        """Files under `path` matching a glob (`*`, `?`, `[...]`, `**` for any depth), sorted."""
        ...

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        ignore_case: bool = False,
        max_results: int = 200,
    ) -> list[GrepMatch]:
        """Lines matching a regular expression in files under `path` (optionally only files matching `glob`)."""
        ...

    async def delete(self, path: str) -> None:
        """Delete a file (not a directory)."""
        ...

    async def exists(self, path: str) -> bool: ...

    async def stat(self, path: str) -> FileInfo: ...


def match_glob(pattern: str, path: str, base: str = "/") -> bool:
    """Whether the virtual file `path` matches the glob `pattern` searched from the directory `base`.

    A relative pattern is matched against the path relative to `base`, an absolute one (leading `/`) against the whole
    virtual path. `*` and `?` never cross a `/`, `[...]` is a character class (`[!...]` negated), and a `**` component
    matches any number of directories, none included. `.`/empty components are ignored and `..` never matches, so a
    pattern cannot reach outside the files it is searched over.

    >>> match_glob("**/*.py", "/src/pkg/mod.py")
    True
    >>> match_glob("*.py", "/src/pkg/mod.py", base="/src")
    False
    >>> match_glob("/src/*/mod.py", "/src/pkg/mod.py", base="/src")
    True
    """
    if pattern.startswith("/"):
        relative = path
    else:
        prefix = base.rstrip("/") + "/"
        if not path.startswith(prefix):
            return False
        relative = path[len(prefix) :]
    return _match_parts(_split(pattern), tuple(p for p in relative.split("/") if p))


def _split(pattern: str) -> tuple[str, ...]:
    return tuple(p for p in pattern.split("/") if p not in ("", "."))


def _match_parts(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Component-wise glob match, iterative (no recursion: paths may be ~2,000 components deep)."""

    def closure(states: set[int]) -> set[int]:
        for start in sorted(states):  # a `**` may match no component: its successor is reachable too
            i = start
            while i < len(pattern) and pattern[i] == "**":
                i += 1
                states.add(i)
        return states

    states = closure({0})
    for part in parts:
        advanced: set[int] = set()
        for i in states:
            if i == len(pattern):
                continue
            if pattern[i] == "**":
                advanced.add(i)
            elif part != ".." and fnmatchcase(part, pattern[i]):
                advanced.add(i + 1)
        states = closure(advanced)
        if not states:
            return False
    return len(pattern) in states


def grep_path_matches(glob: str | None, path: str, base: str = "/") -> bool:
    """The file filter of `grep`: no glob matches everything; a glob without `/` (`*.py`) is matched against the
    file name at any depth (like ripgrep's `--glob`); one with `/` is matched like `match_glob`."""
    if glob is None or glob == "":
        return True
    if "/" not in glob:
        return fnmatchcase(path.rsplit("/", 1)[-1], glob)
    return match_glob(glob, path, base)


def compile_grep_pattern(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """`pattern` compiled as a Python regular expression, or a `BackendError` saying how to fix it."""
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise BackendError(
            f"invalid regular expression {pattern!r}: {exc}. Escape special characters such as ( [ {{ . * + ? with a "
            "backslash to search for them literally."
        ) from exc


def grep_lines(regex: re.Pattern[str], path: str, text: str, limit: int) -> Iterable[GrepMatch]:
    """The first `limit` lines of `text` that `regex` matches (searched with `regex.search`), as `GrepMatch`es."""
    if limit <= 0:
        return
    found = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if regex.search(line) is not None:
            yield GrepMatch(path, number, line.removesuffix("\r"))
            found += 1
            if found >= limit:
                return


def apply_edit(text: str, old: str, new: str, *, path: str, replace_all: bool = False) -> tuple[str, int]:
    """`text` with `old` replaced by `new`, and the number of replacements: the shared rule of every `edit`.

    `old` must occur exactly once unless `replace_all` (then at least once); otherwise `EditError` says what to do.

    >>> apply_edit("a = 1", "1", "2", path="/x.py")
    ('a = 2', 1)
    """
    if old == "":
        raise EditError(f"old_string is empty: copy the exact text to replace from {path} (read it first)")
    count = text.count(old)
    if count == 0:
        raise EditError(
            f"old_string was not found in {path}: read the file again and copy the exact text, including whitespace "
            "and indentation"
        )
    if count > 1 and not replace_all:
        raise EditError(
            f"old_string occurs {count} times in {path}: include more surrounding lines so it matches once, or pass "
            "replace_all=True to replace every occurrence"
        )
    return text.replace(old, new), count
