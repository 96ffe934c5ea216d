"""`StateBackend`: an in-memory virtual file system that travels with the session.

```python
import asyncio, json
from pydantic_deep.backends import StateBackend

fs = StateBackend()
asyncio.run(fs.write("/notes/todo.md", "- ship it\\n"))
saved = json.dumps(fs.to_dict())                      # JSON-safe
again = StateBackend.from_dict(json.loads(saved))
assert asyncio.run(again.read("notes/todo.md")) == "- ship it\\n"
```
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema
from typing_extensions import TypedDict

from ._grep import GREP_TIME_LIMIT, GrepBudget, compile_grep_pattern, grep_lines, grep_path_matches
from ._pages import FilePage, text_page
from ._protocol import BINARY_SNIFF_CHARS, FileInfo, GrepMatch, apply_edit, match_glob, normalize_path

__all__ = ["StateBackend", "StateBackendDict", "StateFileDict"]

_FORMAT_VERSION = 1


class StateFileDict(TypedDict):
    content: str
    modified: float


class StateBackendDict(TypedDict):
    """The JSON-safe form of a `StateBackend` (`to_dict()` / `from_dict()`)."""

    version: int
    files: dict[str, StateFileDict]


@dataclass
class _File:
    content: str
    modified: float


def _size(content: str) -> int:
    return len(content.encode("utf-8", "surrogatepass"))


def _under(path: str, directory: str) -> bool:
    return directory == "/" or path.startswith(directory + "/")


class StateBackend:
    """A `BackendProtocol` kept in memory: a dict of virtual path → text and modification time.

    Directories are implied by the files in them (there are no empty directories). `to_dict()`/`from_dict()` give a
    JSON-safe form, and the class is a pydantic type: a model field `backend: StateBackend` validates from that dict
    (or an instance) and serializes to it, so the file system is saved and restored with the session.

    Args:
        files: Initial files, virtual path → text (paths are normalized; all get the same mtime).
        clock: Where modification times come from (seconds since the epoch); inject one for deterministic tests.
        grep_time_limit: Seconds a `grep` may take in all.
    """

    def __init__(
        self,
        files: Mapping[str, str] | None = None,
        *,
        clock: Callable[[], float] = time.time,
        grep_time_limit: float = GREP_TIME_LIMIT,
    ) -> None:
        self._clock = clock
        self.grep_time_limit = grep_time_limit
        """Seconds a `grep` may take in all (see `GrepBudget` for the bounds on slow patterns)."""
        self._files: dict[str, _File] = {}
        now = clock()
        for path, content in (files or {}).items():
            self._put(normalize_path(path), content, now)

    # -- serialization -------------------------------------------------------------------------------------------------

    def to_dict(self) -> StateBackendDict:
        """The JSON-safe form: `{"version": 1, "files": {path: {"content": ..., "modified": ...}}}`."""
        files = {path: StateFileDict(content=f.content, modified=f.modified) for path, f in sorted(self._files.items())}
        return StateBackendDict(version=_FORMAT_VERSION, files=files)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, clock: Callable[[], float] = time.time) -> StateBackend:
        """A backend restored from `to_dict()` output (e.g. after a JSON round trip); `ValueError` if malformed."""
        version = data.get("version", _FORMAT_VERSION)
        files: object = data.get("files")
        if version != _FORMAT_VERSION or not isinstance(files, Mapping):
            raise ValueError(
                f"not a StateBackend dict (expected version {_FORMAT_VERSION} and a 'files' mapping): "
                "pass the output of StateBackend.to_dict()"
            )
        backend = cls(clock=clock)
        for path, entry in cast(Mapping[object, object], files).items():
            if not isinstance(path, str) or not isinstance(entry, Mapping):
                raise ValueError(f"bad StateBackend entry {path!r}: expected path → {{'content', 'modified'}}")
            fields = cast(Mapping[str, object], entry)
            content, modified = fields.get("content"), fields.get("modified", 0.0)
            if not isinstance(content, str) or not isinstance(modified, int | float):
                raise ValueError(f"bad StateBackend entry {path!r}: 'content' must be a str and 'modified' a number")
            try:
                backend._put(normalize_path(path), content, float(modified))
            except OSError as exc:
                raise ValueError(f"bad StateBackend entry {path!r}: {exc}") from exc
        return backend

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        from_dict = core_schema.no_info_after_validator_function(
            cls.from_dict, handler.generate_schema(StateBackendDict)
        )
        return core_schema.json_or_python_schema(
            json_schema=from_dict,
            python_schema=core_schema.union_schema([core_schema.is_instance_schema(cls), from_dict]),
            serialization=core_schema.plain_serializer_function_ser_schema(lambda backend: backend.to_dict()),
        )

    def __repr__(self) -> str:
        return f"StateBackend({len(self._files)} files)"

    # -- internals -----------------------------------------------------------------------------------------------------

    def _put(self, path: str, content: str, modified: float) -> None:
        if path == "/" or self._is_dir(path):
            raise IsADirectoryError(f"{path} is a directory: write to a file inside it")
        parent = path.rsplit("/", 1)[0]
        while parent:
            if parent in self._files:
                raise NotADirectoryError(f"{parent} is a file, so {path} cannot be created under it")
            parent = parent.rsplit("/", 1)[0]
        self._files[path] = _File(content, modified)

    def _is_dir(self, path: str) -> bool:
        if path == "/":
            return True
        prefix = path + "/"
        return any(p.startswith(prefix) for p in self._files)

    def _file(self, path: str) -> _File:
        path = normalize_path(path)
        found = self._files.get(path)
        if found is not None:
            return found
        if self._is_dir(path):
            raise IsADirectoryError(f"{path} is a directory: call ls to see its files")
        raise FileNotFoundError(f"{path} does not exist")

    def _dir(self, path: str) -> str:
        path = normalize_path(path)
        if path in self._files:
            raise NotADirectoryError(f"{path} is a file, not a directory")
        if not self._is_dir(path):
            raise FileNotFoundError(f"directory {path} does not exist")
        return path

    def _files_under(self, directory: str) -> list[str]:
        return sorted(p for p in self._files if _under(p, directory))

    # -- BackendProtocol -----------------------------------------------------------------------------------------------

    async def read(self, path: str) -> str:
        return self._file(path).content

    async def read_page(self, path: str, offset: int, limit: int, *, max_line_chars: int, max_chars: int) -> FilePage:
        """Lines `offset+1 … offset+limit` of a file (see `FilePage`)."""
        content = self._file(path).content
        return text_page(content, offset, limit, max_line_chars=max_line_chars, max_chars=max_chars)

    async def write(self, path: str, content: str) -> None:
        self._put(normalize_path(path), content, self._clock())

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        vpath = normalize_path(path)
        file = self._file(vpath)
        text, count = apply_edit(file.content, old, new, path=vpath, replace_all=replace_all)
        self._files[vpath] = _File(text, self._clock())
        return count

    async def ls(self, path: str = "/") -> list[FileInfo]:
        directory = self._dir(path)
        prefix = directory.rstrip("/") + "/"
        entries: dict[str, FileInfo] = {}
        for file_path in self._files_under(directory):
            name = file_path[len(prefix) :].split("/", 1)[0]
            child = prefix + name
            if child == file_path:
                entries[child] = self._info(child)
            elif child not in entries:
                entries[child] = self._dir_info(child)
        return [entries[k] for k in sorted(entries)]

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        directory = self._dir(path)
        return [p for p in self._files_under(directory) if match_glob(pattern, p, directory)]

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
        path = normalize_path(path)
        candidates = [path] if path in self._files else self._files_under(self._dir(path))
        base = path if path not in self._files else path.rsplit("/", 1)[0] or "/"
        matches: list[GrepMatch] = []
        for file_path in candidates:
            if len(matches) >= max_results or budget.expired():
                break
            content = self._files[file_path].content
            if "\x00" in content[:BINARY_SNIFF_CHARS] or not grep_path_matches(glob, file_path, base):
                continue
            matches.extend(grep_lines(compiled, file_path, content, max_results - len(matches), budget=budget))
        budget.raise_if_stopped(matches)
        return matches

    async def delete(self, path: str) -> None:
        self._file(path)
        del self._files[normalize_path(path)]

    async def exists(self, path: str) -> bool:
        path = normalize_path(path)
        return path in self._files or self._is_dir(path)

    async def stat(self, path: str) -> FileInfo:
        path = normalize_path(path)
        if path in self._files:
            return self._info(path)
        if self._is_dir(path):
            return self._dir_info(path)
        raise FileNotFoundError(f"{path} does not exist")

    def _info(self, path: str) -> FileInfo:
        file = self._files[path]
        return FileInfo(path, False, _size(file.content), file.modified)

    def _dir_info(self, path: str) -> FileInfo:
        modified = max((self._files[p].modified for p in self._files_under(path)), default=0.0)
        return FileInfo(path, True, 0, modified)
