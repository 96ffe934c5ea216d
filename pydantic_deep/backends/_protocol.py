"""The backend protocol: an async virtual file system the harness and its tools work through.

Paths are virtual and absolute: `/` is the backend's root, so `/large_tool_results/x` and `large_tool_results/x`
name the same file. A path that would leave the root (`..` above it, a symlink leading out, a NUL byte, an
over-long name) raises `PathEscapeError`, a `PermissionError`, which the file tools turn into a tool error.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Protocol, runtime_checkable

from ._names import escape_name, shown_text, unescape_name

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
    "count_occurrences",
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
    r"""The canonical virtual path (`/a/b`) of `path`, or `PathEscapeError`.

    `.` and empty components are dropped and `..` goes up one level, but never above the root. A backslash starts
    an escape (`\xHH` for a byte, `\\` for a backslash; see `escape_name`) and any other backslash is refused
    rather than guessed at (on POSIX it is a file-name character, on Windows a separator). The result spells every
    name canonically: printable, valid UTF-8, control characters and undecodable bytes escaped.

    >>> print(normalize_path(r"src/./a/../b\xff.txt"), normalize_path("tab\there"))
    /src/b\xff.txt /tab\x09here
    """
    if not isinstance(path, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise PathEscapeError(f"a path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise PathEscapeError("a path may not contain a NUL byte")
    if "\\" not in path and path.isprintable():  # the common case: nothing to escape or decode
        if len(path) > MAX_PATH_BYTES // 4 and len(path.encode("utf-8")) > MAX_PATH_BYTES:
            raise PathEscapeError(f"path longer than {MAX_PATH_BYTES} bytes")
        parts: list[str] = []
        for name in path.split("/"):
            if name in ("", "."):
                continue
            if name == "..":
                if not parts:
                    raise PathEscapeError(f"{_quote(path)} climbs above the root")
                parts.pop()
            elif len(name) > MAX_COMPONENT_BYTES // 4 and len(name.encode("utf-8")) > MAX_COMPONENT_BYTES:
                raise PathEscapeError(f"a path component is longer than {MAX_COMPONENT_BYTES} bytes")
            else:
                parts.append(name)
        return "/" + "/".join(parts)
    if len(path) > 4 * MAX_PATH_BYTES:
        raise PathEscapeError(f"path longer than {MAX_PATH_BYTES} bytes")
    names: list[tuple[str, int]] = []
    for component in path.split("/"):
        try:
            raw = unescape_name(component)
        except ValueError as exc:
            raise PathEscapeError(f"{exc}: {_quote(path)}") from None
        if b"\x00" in raw or b"/" in raw:
            raise PathEscapeError(f"an escape in {_quote(path)} stands for a NUL byte or a '/', which no name may hold")
        names.append((escape_name(raw), len(raw)))
    if sum(size + 1 for _, size in names) - 1 > MAX_PATH_BYTES:
        raise PathEscapeError(f"path longer than {MAX_PATH_BYTES} bytes")
    return _join(path, names)


def _quote(path: str) -> str:
    return shown_text(path)


def _join(path: str, names: list[tuple[str, int]]) -> str:
    """`/a/b` from canonical names and their sizes in bytes: `.` and empty names dropped, `..` going up."""
    parts: list[str] = []
    for name, size in names:
        if name in ("", "."):
            continue
        if name == "..":
            if not parts:
                raise PathEscapeError(f"{_quote(path)} climbs above the root")
            parts.pop()
            continue
        if size > MAX_COMPONENT_BYTES:
            raise PathEscapeError(f"a path component is longer than {MAX_COMPONENT_BYTES} bytes")
        parts.append(name)
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


def count_occurrences(text: str, sub: str, *, limit: int = 1_000) -> int:
    """How many times `sub` occurs in `text`, overlapping occurrences included (`aa` occurs twice in `aaa`),
    counting up to `limit`.

    >>> count_occurrences("aaa", "aa"), "aaa".count("aa")
    (2, 1)
    """
    if sub == "":
        raise ValueError("cannot count occurrences of an empty string")
    count, start = 0, text.find(sub)
    while start >= 0 and count < limit:
        count += 1
        start = text.find(sub, start + 1)
    return count


def _times(count: int, limit: int) -> str:
    return f"more than {limit - 1:,} times" if count >= limit else f"{count:,} times"


def apply_edit(text: str, old: str, new: str, *, path: str, replace_all: bool = False) -> tuple[str, int]:
    """`text` with `old` replaced by `new`, and the number of replacements: the shared rule of every `edit`.

    `old` must occur exactly once unless `replace_all` (then at least once); otherwise `EditError` says what to do.
    Occurrences that overlap (`aa` in `aaa`) count as several: such an edit is ambiguous. When `old` is not found
    but matches once its `\n`s are read as `\r\n` (a CRLF file, `old` typed with plain newlines), that match is
    used and `new` gets CRLF line endings too. A `text` holding undecodable bytes (as surrogate escapes) keeps them.

    >>> apply_edit("a = 1", "1", "2", path="/x.py")
    ('a = 2', 1)
    """
    if old == "":
        raise EditError(f"old_string is empty: copy the exact text to replace from {path} (read it first)")
    limit = 1_000
    count = count_occurrences(text, old, limit=limit)
    if count == 0 and "\n" in old and "\r" not in old and "\r\n" in text:
        crlf = old.replace("\n", "\r\n")
        if count_occurrences(text, crlf, limit=limit):
            old, new = crlf, new.replace("\r\n", "\n").replace("\n", "\r\n")
            count = count_occurrences(text, old, limit=limit)
    if count == 0:
        if "\ufffd" in old and any("\udc80" <= c <= "\udcff" for c in text):
            raise EditError(
                f"old_string was not found in {path}: it contains \ufffd, which read_file shows in place of bytes "
                "that are not valid UTF-8; those bytes cannot be typed. Choose an old_string next to them without "
                "any \ufffd (the bytes you do not edit are kept as they are)"
            )
        raise EditError(
            f"old_string was not found in {path}: read the file again and copy the exact text, including whitespace "
            "and indentation"
        )
    if count > 1 and not replace_all:
        overlap = " (some occurrences overlap)" if count > text.count(old) else ""
        raise EditError(
            f"old_string occurs {_times(count, limit)} in {path}{overlap}: include more surrounding lines so it "
            "matches once, or pass replace_all=True to replace every occurrence"
        )
    return text.replace(old, new), text.count(old)
