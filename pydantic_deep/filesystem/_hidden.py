"""Directories the file tools leave out of `ls`, `glob` and `grep` unless the path given is inside one: the eviction
archive (`/large_tool_results/`) is for reading back what a preview points at, not part of the project. Without
this, a search of `/` returns the archived outputs' lines first (200 matches from one 8,000-line log) and never
reaches the source file that holds the word."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..backends import (
    GREP_TIME_LIMIT,
    BackendError,
    BackendProtocol,
    FileInfo,
    GrepBudget,
    GrepMatch,
    GrepStopped,
    compile_grep_pattern,
    normalize_path,
)

__all__ = ["DEFAULT_HIDDEN_DIRS", "HiddenDirs"]

DEFAULT_HIDDEN_DIRS = ("/large_tool_results/",)
"""Where `EvictionProcessor` archives large tool outputs by default."""


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


class HiddenDirs:
    """A set of virtual directories, and the listing and search rules around them."""

    def __init__(self, dirs: Iterable[str]) -> None:
        normalized: list[str] = []
        for directory in dirs:
            vpath = normalize_path(directory)
            if vpath == "/":
                raise ValueError("hidden_dirs cannot hold '/': it would hide every file")
            if vpath not in normalized:
                normalized.append(vpath)
        self.dirs = tuple(normalized)

    def __repr__(self) -> str:
        return f"HiddenDirs({list(self.dirs)!r})"

    def below(self, vpath: str) -> list[str]:
        """The hidden directories a listing or search of `vpath` would reach: none when `vpath` is inside one
        (the caller asked for it)."""
        if any(_within(vpath, hidden) for hidden in self.dirs):
            return []
        return [hidden for hidden in self.dirs if _within(hidden, vpath)]

    def visible(self, paths: Sequence[str], vpath: str) -> list[str]:
        """`paths` found under `vpath`, without those in a hidden directory below it."""
        below = self.below(vpath)
        return [p for p in paths if not any(_within(p, hidden) for hidden in below)] if below else list(paths)

    def visible_entries(self, entries: Sequence[FileInfo], vpath: str) -> list[FileInfo]:
        """`ls` entries of `vpath`, without the hidden directories."""
        shown = set(self.visible([e.path for e in entries], vpath))
        return [e for e in entries if e.path in shown]

    async def grep(
        self,
        backend: BackendProtocol,
        pattern: str,
        vpath: str,
        *,
        glob: str | None,
        ignore_case: bool,
        max_results: int,
    ) -> list[GrepMatch]:
        """`backend.grep` over `vpath` without visiting the hidden directories below it: the search runs on each
        visible file or directory around them (a path-relative `glob` made absolute, so it means the same), and
        the matches are merged in path order. `GrepStopped` when a part stops early or the whole takes longer
        than a single search may."""
        below = [hidden for hidden in self.below(vpath) if await backend.exists(hidden)]
        if not below:
            return await backend.grep(pattern, vpath, glob=glob, ignore_case=ignore_case, max_results=max_results)
        compile_grep_pattern(pattern, ignore_case=ignore_case)  # a bad pattern fails once, before any search
        if glob and "/" in glob and not glob.startswith("/"):
            glob = vpath.rstrip("/") + "/" + glob
        budget = GrepBudget(time_limit=GREP_TIME_LIMIT)
        matches: list[GrepMatch] = []
        for target, is_dir in await _around(backend, vpath, below):
            try:
                matches += await backend.grep(
                    pattern, target, glob=glob, ignore_case=ignore_case, max_results=max_results
                )
            except GrepStopped as exc:
                raise GrepStopped(str(exc), _in_order(matches + exc.matches, max_results)) from None
            except (OSError, BackendError):
                if is_dir:
                    raise
                # a FIFO, a link leading out, a file that vanished: skipped, as a search of the directory does
            if budget.expired():
                budget.raise_if_stopped(_in_order(matches, max_results))
        return _in_order(matches, max_results)


def _in_order(matches: list[GrepMatch], limit: int) -> list[GrepMatch]:
    return sorted(matches, key=lambda m: (m.path, m.line_number))[:limit]


async def _around(backend: BackendProtocol, vpath: str, hidden: list[str]) -> list[tuple[str, bool]]:
    """(path, whether a directory) of the entries of directory `vpath` that hold no hidden directory, and the same
    inside those that do (the hidden directories themselves left out)."""
    targets: list[tuple[str, bool]] = []
    for entry in await backend.ls(vpath):
        if any(_within(entry.path, h) for h in hidden):
            continue
        inner = [h for h in hidden if _within(h, entry.path)]
        if entry.is_dir and inner:
            targets += await _around(backend, entry.path, inner)
        else:
            targets.append((entry.path, entry.is_dir))
    return targets
