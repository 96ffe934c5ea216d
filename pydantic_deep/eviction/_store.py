"""Saving evicted outputs through a backend: content-hash deduplication, naming, retention and cleanup."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ..backends import BackendProtocol, FileInfo, normalize_path
from ._policy import EvictionPolicy, RetentionPolicy

__all__ = ["EvictionArchive"]

_INDEX_NAME = ".index.json"


_DIGEST_CHARS = 16


def _with_digest(name: str, digest: str) -> str:
    """`name` with the content hash in it (before the extension) unless the naming pattern already put it there:
    two different outputs never share a name, whatever the call ids, sessions or clocks."""
    short = digest[:_DIGEST_CHARS]
    if short in name:
        return name
    stem, dot, suffix = name.rpartition(".")
    if not dot or not stem:
        return f"{name}_{short}"
    return f"{stem}_{short}.{suffix}"


@dataclass
class EvictionArchive:
    """The eviction directory of one backend: where outputs go, which content is already there, what to delete.

    Identical outputs are stored once: an index (`.index.json` in the directory) maps content hashes to files.
    """

    backend: BackendProtocol
    directory: str = "/large_tool_results/"
    removed: set[str] = field(default_factory=set[str], init=False, repr=False)
    """Every file this archive deleted (retention, cleanup): previews that point to one are rewritten to say so."""
    _index: dict[str, str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.directory = normalize_path(self.directory).rstrip("/") + "/"

    @property
    def index_path(self) -> str:
        return self.directory + _INDEX_NAME

    async def _load_index(self) -> dict[str, str]:
        if self._index is None:
            index: dict[str, str] = {}
            try:
                raw: Any = json.loads(await self.backend.read(self.index_path))
                if isinstance(raw, dict):
                    index = {str(k): str(v) for k, v in raw.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            except (FileNotFoundError, ValueError):
                pass
            self._index = index
        return self._index

    async def _save_index(self) -> None:
        await self.backend.write(self.index_path, json.dumps(await self._load_index(), indent=0, sort_keys=True))

    async def save(
        self, text: str, *, policy: EvictionPolicy, tool_call_id: str, tool_name: str, kind: str
    ) -> tuple[str, bool]:
        """Store `text` (once per content) and return (path, whether it was already stored)."""
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        index = await self._load_index()
        existing = index.get(digest)
        if existing is not None and await self.backend.exists(existing):
            return existing, True
        name = _with_digest(
            policy.file_name(tool_call_id=tool_call_id, tool_name=tool_name, kind=kind, digest=digest), digest
        )
        path = self.directory + name
        if await self.backend.exists(path):
            # The name holds the content hash: a file by that name holds these very bytes (written by a parallel
            # call or another session sharing the backend), so it is shared, never overwritten by other bytes.
            index[digest] = path
            return path, True
        await self.backend.write(path, text)
        self.removed.discard(path)
        index[digest] = path
        await self._save_index()
        return path, False

    async def files(self) -> list[FileInfo]:
        """The archived files, oldest first. Hidden names are never archived outputs: the index file, and the
        temporary file of a write in progress (`LocalBackend` writes `.name.*.tmp`, then renames it)."""
        try:
            entries = await self.backend.ls(self.directory)
        except FileNotFoundError:
            return []
        files = [e for e in entries if not e.is_dir and not e.path.rsplit("/", 1)[-1].startswith(".")]
        return sorted(files, key=lambda e: (e.modified, e.path))

    async def apply_retention(
        self, retention: RetentionPolicy, *, now: float | None = None, protected: Collection[str] = ()
    ) -> list[str]:
        """Delete the oldest files until the policy holds; returns exactly the paths deleted. A `protected` file
        (one a preview in a live history points to) is never deleted, even if the limits stay exceeded."""
        files = await self.files()
        now = time.time() if now is None else now
        doomed: list[FileInfo] = []
        if retention.max_age_s is not None:
            doomed = [f for f in files if now - f.modified > retention.max_age_s and f.path not in protected]
        kept = [f for f in files if f not in doomed]
        deletable = [f for f in kept if f.path not in protected]  # oldest first
        while deletable and (
            (retention.max_files is not None and len(kept) > retention.max_files)
            or (retention.max_bytes is not None and sum(f.size for f in kept) > retention.max_bytes)
        ):
            victim = deletable.pop(0)
            kept.remove(victim)
            doomed.append(victim)
        return await self.delete([f.path for f in doomed])

    async def delete(self, paths: list[str]) -> list[str]:
        """Delete files and forget them in the index; returns the paths actually deleted."""
        removed: list[str] = []
        for path in paths:
            try:
                await self.backend.delete(path)
            except FileNotFoundError:
                continue
            removed.append(path)
        self.removed.update(removed)
        if removed:
            index = await self._load_index()
            gone = set(removed)
            for digest in [d for d, p in index.items() if p in gone]:
                del index[digest]
            await self._save_index()
        return removed
