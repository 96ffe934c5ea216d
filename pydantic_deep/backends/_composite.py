"""`CompositeBackend`: one virtual file system made of several backends, routed by path prefix.

```python
import asyncio
from pydantic_deep.backends import CompositeBackend, LocalBackend, StateBackend

fs = CompositeBackend(StateBackend(), routes={"/large_tool_results/": LocalBackend("archive")})
asyncio.run(fs.write("/large_tool_results/call_1", "big output"))   # on disk: archive/large_tool_results/call_1
asyncio.run(fs.write("/notes.md", "kept in memory"))
print([e.path for e in asyncio.run(fs.ls("/"))])                      # ['/large_tool_results', '/notes.md']
```
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from ._grep import GrepStopped
from ._pages import FilePage, SupportsReadPage, text_page
from ._protocol import BackendProtocol, FileInfo, GrepMatch, normalize_path

__all__ = ["CompositeBackend"]


def _under(path: str, directory: str) -> bool:
    return directory in ("/", path) or path.startswith(directory + "/")


class CompositeBackend:
    """A `BackendProtocol` that sends each path to the backend of its longest matching route prefix, else `default`.

    A route prefix names a directory: `"/large_tool_results/"` (or without the trailing slash) owns
    `/large_tool_results` and everything under it, not `/large_tool_results_old`.

    Paths handed to a routed backend keep their full virtual path: `/large_tool_results/x` is stored by the routed
    backend as `/large_tool_results/x` (for a `LocalBackend("archive")`, the file `archive/large_tool_results/x`).
    So a path means the same thing whichever backend holds it, results (`ls`, `glob`, `grep`) need no rewriting, and
    a backend can be moved in or out of a route without renaming its files.

    `ls` of a directory above a route shows the route's directory even before anything is written there; `glob` and
    `grep` search every backend that owns part of the tree and merge the results (sorted by path). A file the default
    backend holds under a routed prefix is hidden by the route.

    Args:
        default: The backend for every path no route claims.
        routes: Prefix → backend. The longest matching prefix wins.
    """

    def __init__(self, default: BackendProtocol, routes: Mapping[str, BackendProtocol] | None = None) -> None:
        self.default = default
        self.routes: dict[str, BackendProtocol] = {}
        for prefix, backend in (routes or {}).items():
            key = normalize_path(prefix)
            if key == "/":
                raise ValueError("a route cannot be '/': pass that backend as `default` instead")
            self.routes[key] = backend
        self._prefixes = sorted(self.routes, key=len, reverse=True)

    def __repr__(self) -> str:
        return f"CompositeBackend({self.default!r}, routes={self.routes!r})"

    def _route(self, vpath: str) -> tuple[str | None, BackendProtocol]:
        for prefix in self._prefixes:
            if _under(vpath, prefix):
                return prefix, self.routes[prefix]
        return None, self.default

    def backend_for(self, path: str) -> BackendProtocol:
        """The backend that holds `path`."""
        return self._route(normalize_path(path))[1]

    def _owners_below(self, vpath: str) -> list[tuple[str | None, BackendProtocol]]:
        """The owner of `vpath` and every route strictly inside it: the backends a search of `vpath` must visit."""
        owners = [self._route(vpath)]
        owners += [(p, self.routes[p]) for p in self._prefixes if p != vpath and _under(p, vpath)]
        return owners

    def _is_virtual_dir(self, vpath: str) -> bool:
        """Whether `vpath` is a route prefix or one of its ancestors (a directory even when empty)."""
        return any(_under(prefix, vpath) for prefix in self._prefixes)

    # -- single-path operations ----------------------------------------------------------------------------------------

    async def read(self, path: str) -> str:
        return await self.backend_for(path).read(normalize_path(path))

    async def read_page(self, path: str, offset: int, limit: int, *, max_line_chars: int, max_chars: int) -> FilePage:
        """A page of a file's lines, from its backend's `read_page` (or, lacking one, from its `read`)."""
        vpath = normalize_path(path)
        backend = self.backend_for(vpath)
        if isinstance(backend, SupportsReadPage):
            return await backend.read_page(vpath, offset, limit, max_line_chars=max_line_chars, max_chars=max_chars)
        text = await backend.read(vpath)
        return text_page(text, offset, limit, max_line_chars=max_line_chars, max_chars=max_chars)

    async def write(self, path: str, content: str) -> None:
        await self.backend_for(path).write(normalize_path(path), content)

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        return await self.backend_for(path).edit(normalize_path(path), old, new, replace_all=replace_all)

    async def delete(self, path: str) -> None:
        await self.backend_for(path).delete(normalize_path(path))

    async def exists(self, path: str) -> bool:
        vpath = normalize_path(path)
        return self._is_virtual_dir(vpath) or await self.backend_for(vpath).exists(vpath)

    async def stat(self, path: str) -> FileInfo:
        vpath = normalize_path(path)
        try:
            return await self.backend_for(vpath).stat(vpath)
        except FileNotFoundError:
            if self._is_virtual_dir(vpath):
                return FileInfo(vpath, True, 0, 0.0)
            raise

    # -- tree operations -----------------------------------------------------------------------------------------------

    async def ls(self, path: str = "/") -> list[FileInfo]:
        vpath = normalize_path(path)
        prefix, backend = self._route(vpath)
        entries: dict[str, FileInfo] = {}
        try:
            for info in await backend.ls(vpath):
                if self._route(info.path)[0] == prefix or info.is_dir:
                    entries[info.path] = info
        except FileNotFoundError:
            if not self._is_virtual_dir(vpath):
                raise
        base = vpath.rstrip("/") + "/"
        for route in self._prefixes:
            if route != vpath and _under(route, vpath):
                child = base + route[len(base) :].split("/", 1)[0]
                if child in self.routes or child not in entries or not entries[child].is_dir:
                    entries[child] = await self.stat(child)
        return [entries[k] for k in sorted(entries)]

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        vpath = normalize_path(path)
        owners = self._owners_below(vpath)
        results = await asyncio.gather(*(self._glob_one(prefix, b, pattern, vpath) for prefix, b in owners))
        return sorted({p for found in results for p in found})

    async def _glob_one(self, prefix: str | None, backend: BackendProtocol, pattern: str, vpath: str) -> list[str]:
        try:
            found = await backend.glob(pattern, vpath)
        except FileNotFoundError:
            if self._tolerates_missing(prefix, vpath):
                return []
            raise
        return [p for p in found if self._route(p)[0] == prefix]

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        ignore_case: bool = False,
        max_results: int = 200,
    ) -> list[GrepMatch]:
        vpath = normalize_path(path)
        owners = self._owners_below(vpath)
        results = await asyncio.gather(
            *(
                self._grep_one(prefix, b, vpath, pattern, glob=glob, ignore_case=ignore_case, max_results=max_results)
                for prefix, b in owners
            )
        )
        stopped = [found for found in results if isinstance(found, GrepStopped)]
        lists = [found.matches if isinstance(found, GrepStopped) else found for found in results]
        merged = sorted((m for found in lists for m in found), key=lambda m: (m.path, m.line_number))
        if stopped:
            raise GrepStopped(str(stopped[0]), merged[:max_results])
        return merged[:max_results]

    async def _grep_one(
        self,
        prefix: str | None,
        backend: BackendProtocol,
        vpath: str,
        pattern: str,
        *,
        glob: str | None,
        ignore_case: bool,
        max_results: int,
    ) -> list[GrepMatch] | GrepStopped:
        try:
            found = await backend.grep(pattern, vpath, glob=glob, ignore_case=ignore_case, max_results=max_results)
        except FileNotFoundError:
            if self._tolerates_missing(prefix, vpath):
                return []
            raise
        except GrepStopped as exc:  # keep what it found; the merge says the search stopped early
            return GrepStopped(str(exc), [m for m in exc.matches if self._route(m.path)[0] == prefix])
        return [m for m in found if self._route(m.path)[0] == prefix]

    def _tolerates_missing(self, prefix: str | None, vpath: str) -> bool:
        """A backend may lack `vpath` when it only owns a route below it, or `vpath` is itself a route directory."""
        return (prefix is not None and prefix != vpath and _under(prefix, vpath)) or self._is_virtual_dir(vpath)
