"""Virtual file system hygiene: an overview with cleanup suggestions, and a cleanup that really deletes.

```python
import asyncio
from pydantic_deep.backends import StateBackend
from pydantic_deep.filesystem import cleanup_old_archives, organize_virtual_fs

fs = StateBackend({f"/large_tool_results/mcp_search_20250101_0000{i:02}.json": "{}" for i in range(5)})
print(asyncio.run(organize_virtual_fs(fs)).render())
result = asyncio.run(cleanup_old_archives(fs, "/large_tool_results", keep_last_n=3))
print(result.removed)   # the two oldest, by the timestamp in their names
```
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic_ai import FunctionToolset, RunContext, ToolFailed

from ..backends import BackendError, BackendProtocol, FileInfo, normalize_path
from ._toolset import describe_error, resolve_backend

__all__ = [
    "CleanupResult",
    "HygieneToolset",
    "PrefixGroup",
    "VirtualFsOverview",
    "archive_time",
    "cleanup_old_archives",
    "list_files",
    "organize_virtual_fs",
]

_STAMP = re.compile(r"(?<!\d)(\d{8})_(\d{6})(?!\d)")
DAY = 86_400.0


async def list_files(backend: BackendProtocol, path: str = "/") -> list[FileInfo]:
    """Every file under the directory `path` (recursively, through `ls`), sorted by path."""
    files: list[FileInfo] = []
    pending = [normalize_path(path)]
    while pending:
        for entry in await backend.ls(pending.pop()):
            if entry.is_dir:
                pending.append(entry.path)
            else:
                files.append(entry)
    return sorted(files, key=lambda f: f.path)


def archive_time(info: FileInfo) -> float:
    """When a file was archived: the `YYYYMMDD_HHMMSS` timestamp in its name (read as UTC) if any, else its mtime."""
    match = _STAMP.search(info.path.rsplit("/", 1)[-1])
    if match is not None:
        try:
            return datetime.strptime(match[1] + match[2], "%Y%m%d%H%M%S").replace(tzinfo=UTC).timestamp()
        except ValueError:
            pass  # 8+6 digits that are no date: fall back to mtime
    return info.modified


def _n(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _amount(value: float, unit: str) -> str:
    text = f"{round(value, 1):g}"
    return f"{text} {unit}" if text == "1" else f"{text} {unit}s"


def _age(seconds: float) -> str:
    if seconds >= DAY:
        return _amount(seconds / DAY, "day")
    if seconds >= 3_600:
        return _amount(seconds / 3_600, "hour")
    return _n(round(max(seconds, 0) / 60), "minute")


@dataclass(frozen=True)
class PrefixGroup:
    """The files under one top-level directory (`prefix`), or directly in the root (`prefix == "/"`).

    `oldest` and `newest` are by `archive_time` (the timestamp in the name, else the mtime), as in cleanups.
    """

    prefix: str
    files: int
    total_bytes: int
    oldest: FileInfo
    newest: FileInfo


@dataclass(frozen=True)
class VirtualFsOverview:
    """What `organize_virtual_fs` found: groups by top-level prefix and what to clean up."""

    groups: list[PrefixGroup]
    suggestions: list[str]
    now: float

    @property
    def total_files(self) -> int:
        return sum(g.files for g in self.groups)

    @property
    def total_bytes(self) -> int:
        return sum(g.total_bytes for g in self.groups)

    def _group_line(self, g: PrefixGroup) -> str:
        oldest, newest = _age(self.now - archive_time(g.oldest)), _age(self.now - archive_time(g.newest))
        return (
            f"- {g.prefix}: {_n(g.files, 'file')}, {g.total_bytes:,} bytes; oldest {g.oldest.path} ({oldest} old), "
            f"newest {g.newest.path} ({newest} old)"
        )

    def render(self) -> str:
        """A text report, as the `organize_virtual_fs` tool returns it."""
        if not self.groups:
            return "The virtual file system is empty. Nothing to clean up."
        lines = [f"{_n(self.total_files, 'file')}, {self.total_bytes:,} bytes in total, by top-level prefix:"]
        lines += [self._group_line(g) for g in self.groups]
        lines.append("Suggestions:")
        lines += [f"- {s}" for s in self.suggestions] or ["- Nothing to clean up."]
        return "\n".join(lines)


@dataclass(frozen=True)
class CleanupResult:
    """What `cleanup_old_archives` did: exactly the files it removed, those it kept and those it failed to delete."""

    prefix: str
    keep_last_n: int
    removed: list[str]
    kept: list[str]
    failed: dict[str, str] = field(default_factory=dict[str, str])

    def render(self) -> str:
        """A text report, as the `cleanup_old_archives` tool returns it."""
        if not self.removed and not self.failed:
            kept = _n(len(self.kept), "file")
            return f"Nothing to remove under {self.prefix}: {kept}, keeping the newest {self.keep_last_n}."
        lines = [f"Removed {_n(len(self.removed), 'file')} under {self.prefix} (kept the newest {len(self.kept)}):"]
        lines += [f"- {p}" for p in self.removed]
        if self.failed:
            lines.append(f"Could not remove {_n(len(self.failed), 'file')}:")
            lines += [f"- {p}: {why}" for p, why in self.failed.items()]
        return "\n".join(lines)


async def organize_virtual_fs(
    backend: BackendProtocol,
    *,
    archive_prefixes: Sequence[str] = ("/large_tool_results",),
    max_age_seconds: float = DAY,
    max_files: int = 50,
    keep_last_n: int = 3,
    now: float | None = None,
) -> VirtualFsOverview:
    """Group every file by its top-level prefix (count, total size, oldest, newest) and suggest cleanups.

    Suggested: archives (under `archive_prefixes`) older than `max_age_seconds`, and any prefix with more than
    `max_files` files, when `cleanup_old_archives(prefix, keep_last_n)` would delete something.
    """
    now = time.time() if now is None else now
    by_prefix: dict[str, list[FileInfo]] = {}
    for info in await list_files(backend):
        parts = info.path.split("/")
        by_prefix.setdefault("/" + parts[1] if len(parts) > 2 else "/", []).append(info)
    groups: list[PrefixGroup] = []
    suggestions: list[str] = []
    archives = {normalize_path(p) for p in archive_prefixes}
    for prefix, files in sorted(by_prefix.items()):
        ordered = sorted(files, key=lambda f: (archive_time(f), f.path))
        groups.append(PrefixGroup(prefix, len(files), sum(f.size for f in files), ordered[0], ordered[-1]))
        call = f"cleanup_old_archives({prefix!r}, keep_last_n={keep_last_n})"
        old = [f for f in files if now - archive_time(f) > max_age_seconds]
        if prefix in archives and old and len(files) > keep_last_n:
            suggestions.append(
                f"{_n(len(old), 'file')} in {prefix} older than {_age(max_age_seconds)}: call {call} to delete all "
                f"but the newest {keep_last_n}."
            )
        elif len(files) > max_files:
            what = (
                "delete the files you no longer need"
                if prefix == "/"
                else f"call {call}, or delete the files you no longer need"
            )
            suggestions.append(f"{prefix} holds {_n(len(files), 'file')} (more than {max_files}): {what}.")
    return VirtualFsOverview(groups, suggestions, now)


async def cleanup_old_archives(backend: BackendProtocol, prefix: str, keep_last_n: int = 3) -> CleanupResult:
    """Delete all but the newest `keep_last_n` files under `prefix`, and report exactly which files were removed.

    `prefix` is a directory (`/large_tool_results`: every file under it, at any depth) or a directory plus the start
    of file names (`/large_tool_results/mcp_search_`). Newest is by the `YYYYMMDD_HHMMSS` timestamp in the file name
    when it has one (read as UTC), else by modification time. The root itself is refused.
    """
    vprefix = normalize_path(prefix)
    if vprefix == "/":
        raise ValueError("refusing to clean up the whole file system: name a folder such as /large_tool_results")
    if keep_last_n < 0:
        raise ValueError(f"keep_last_n must be 0 or more, got {keep_last_n}")
    try:
        is_dir = (await backend.stat(vprefix)).is_dir
    except FileNotFoundError:
        is_dir = False
    try:
        if is_dir:
            files = await list_files(backend, vprefix)
        else:
            parent = vprefix.rsplit("/", 1)[0] or "/"
            files = [f for f in await list_files(backend, parent) if f.path.startswith(vprefix)]
    except FileNotFoundError:
        files = []
    ordered = sorted(files, key=lambda f: (archive_time(f), f.path), reverse=True)
    keep = ordered[:keep_last_n]
    removed: list[str] = []
    failed: dict[str, str] = {}
    for info in sorted(ordered[keep_last_n:], key=lambda f: f.path):
        try:
            await backend.delete(info.path)
        except (OSError, BackendError) as exc:
            failed[info.path] = describe_error(exc, info.path)
        else:
            removed.append(info.path)
    return CleanupResult(vprefix, keep_last_n, removed, sorted(f.path for f in keep), failed)


class HygieneToolset(FunctionToolset[Any]):
    """A `FunctionToolset` (a subclass, separate from `FilesystemToolset` so it can be added only where wanted) with
    the tools `organize_virtual_fs()` and `cleanup_old_archives(prefix, keep_last_n=3)`.

    The backend comes from the run (`ctx.deps.backend`) or the `backend` given here, as for `FilesystemToolset`.

    Args:
        backend: The backend used when the run's deps have no `backend`.
        archive_prefixes: Prefixes whose old files `organize_virtual_fs` suggests cleaning up.
        max_age_seconds: Age above which archived files are suggested for cleanup (default one day).
        max_files: A prefix with more files than this is suggested for cleanup.
        **kwargs: Passed to `FunctionToolset` (`id`, `max_retries`, ...).
    """

    def __init__(
        self,
        backend: BackendProtocol | None = None,
        *,
        archive_prefixes: Sequence[str] = ("/large_tool_results",),
        max_age_seconds: float = DAY,
        max_files: int = 50,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.backend = backend
        self.archive_prefixes = tuple(archive_prefixes)
        self.max_age_seconds = max_age_seconds
        self.max_files = max_files
        self.add_function(self._organize_virtual_fs, takes_ctx=True, name="organize_virtual_fs")
        self.add_function(self._cleanup_old_archives, takes_ctx=True, name="cleanup_old_archives")

    async def _organize_virtual_fs(self, ctx: RunContext[Any]) -> str:
        """Overview of the virtual file system: files grouped by top-level folder with counts, sizes, oldest and
        newest file, and suggestions of what to clean up."""
        backend = resolve_backend(ctx, self.backend)
        try:
            overview = await organize_virtual_fs(
                backend,
                archive_prefixes=self.archive_prefixes,
                max_age_seconds=self.max_age_seconds,
                max_files=self.max_files,
            )
        except (OSError, BackendError, ValueError) as exc:
            raise ToolFailed(describe_error(exc, "/")) from exc
        return overview.render()

    async def _cleanup_old_archives(self, ctx: RunContext[Any], prefix: str, keep_last_n: int = 3) -> str:
        """Delete all but the newest `keep_last_n` files under `prefix` (newest by the YYYYMMDD_HHMMSS timestamp in
        the name, else by modification time) and list exactly the files removed.

        Args:
            prefix: A folder such as "/large_tool_results", or a folder plus the start of file names, such as
                "/large_tool_results/mcp_search_".
            keep_last_n: How many of the newest files to keep.
        """
        backend = resolve_backend(ctx, self.backend)
        try:
            result = await cleanup_old_archives(backend, prefix, keep_last_n)
        except (OSError, BackendError, ValueError) as exc:
            raise ToolFailed(describe_error(exc, prefix)) from exc
        return result.render()
