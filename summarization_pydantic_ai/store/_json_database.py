"""A folder of sessions, one `messages.json` each: the `file://` `HistoryDatabase` (today's layout).

`<root>/<session_id>/messages.json`; the session folder may hold other things of the session (memory, checkpoints,
evicted outputs), which `delete_session` leaves alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import anyio.to_thread

from ._catalog import SessionCatalog
from ._catalog_file import read_catalog
from ._database import SearchHit, SessionSummary
from ._file_search import forget_index
from ._json_search import search_texts_path
from ._json_store import JsonHistoryStore
from ._protocol import HistoryStoreError, validate_session_id

__all__ = ["HISTORY_FILE", "JsonHistoryDatabase"]

HISTORY_FILE = "messages.json"
_DERIVED = (".resume", ".catalog", ".index.sqlite", ".index.sqlite-wal", ".index.sqlite-shm")
"""Files derived from a history file (its resume point, its catalogue, its search index), deleted with it."""


class JsonHistoryDatabase:
    """Sessions as folders of `root`, each history a `JsonHistoryStore` (one writer process per session)."""

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = False, lock_timeout: float = 0.0) -> None:
        self.root = Path(root).expanduser().resolve()
        self.fsync = fsync
        self.lock_timeout = lock_timeout
        self._opened: dict[str, JsonHistoryStore] = {}

    @property
    def url(self) -> str:
        return self.root.as_uri()

    def path_of(self, session_id: str) -> Path:
        return self.root / validate_session_id(session_id) / HISTORY_FILE

    def session(self, session_id: str) -> JsonHistoryStore:
        store = JsonHistoryStore.open(self.path_of(session_id), fsync=self.fsync, lock_timeout=self.lock_timeout)
        self._opened[session_id] = store
        return store

    async def sessions(self) -> list[SessionSummary]:
        return [
            SessionSummary(c.session_id, c.message_count + c.compactions, c.size_bytes, None, c.updated_at)
            for c in await self.catalog()
            if c.message_count + c.compactions
        ]

    async def catalog(self, session_ids: Sequence[str] | None = None) -> list[SessionCatalog]:
        """What a listing shows of every session with a history file (or of `session_ids`), most recently updated
        first, from each file's catalogue (`read_catalog`)."""
        return await anyio.to_thread.run_sync(self._catalog, session_ids)

    def _catalog(self, session_ids: Sequence[str] | None) -> list[SessionCatalog]:
        if session_ids is None:
            paths = list(self.root.glob(f"*/{HISTORY_FILE}"))
        else:
            paths = [self.path_of(session_id) for session_id in session_ids]
        entries: list[SessionCatalog] = []
        for path in paths:
            try:
                entry = read_catalog(path)
            except OSError:
                continue  # deleted meanwhile
            if entry is not None:
                entries.append(entry)
        entries.sort(key=lambda c: (c.updated_at or datetime.min.replace(tzinfo=UTC), c.session_id), reverse=True)
        return entries

    async def delete_session(self, session_id: str) -> bool:
        path = self.path_of(session_id)
        store = self._opened.pop(session_id, None) or JsonHistoryStore.open(path)
        store.close()

        def delete() -> bool:
            existed = path.exists()
            forget_index(path)
            derived = [path.with_name(path.name + suffix) for suffix in _DERIVED]
            for file in (path, search_texts_path(path), *derived):
                with contextlib.suppress(FileNotFoundError):
                    file.unlink()
            return existed

        return await anyio.to_thread.run_sync(delete)

    async def search(
        self,
        query: str,
        *,
        session_ids: Sequence[str] | None = None,
        roles: Sequence[str] = (),
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchHit]:
        ids = list(session_ids) if session_ids is not None else [s.session_id for s in await self.sessions()]
        hits: list[SearchHit] = []
        for session_id in ids:
            if not self.path_of(session_id).exists():
                raise HistoryStoreError(f"no session {session_id!r} in {self.root}")
            hits += await JsonHistoryStore.reader(self.path_of(session_id)).search(
                query, roles=roles, tool_name=tool_name, since=since, until=until, limit=offset + limit
            )
        hits.sort(key=lambda h: (-h.score, h.session_id, h.position))
        return hits[offset : offset + limit]

    async def close(self) -> None:
        stores, self._opened = list(self._opened.values()), {}
        for store in stores:
            store.close()
