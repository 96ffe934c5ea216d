"""The sessions of a database `Storage` (SQLite, PostgreSQL), for `SessionManager(store=...)`.

Histories (every record, versions, summaries, search texts), checkpoints and the sessions' metadata (creation time,
where a fork comes from: `Storage.session_metadata`) are in the database, where every host sees them. What is not
history stays in `<base_dir>/sessions/<id>/` on the host that wrote it: evicted tool outputs and plans.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import anyio.to_thread
from pydantic_ai.messages import ModelMessage

from summarization_pydantic_ai import get_message_id, validate_session_id
from summarization_pydantic_ai.cost import CostTotals
from summarization_pydantic_ai.store import SessionCatalog
from summarization_pydantic_ai.store._catalog import fold_records

from ._folders import SessionExistsError, SessionNotFoundError, copy_side_dirs, new_folder, now, write_metadata
from ._history import cut_records, history_in_records
from ._info import METADATA_FILE, SessionInfo, read_metadata, session_info

if TYPE_CHECKING:
    from ..storage import Storage

__all__ = ["DatabaseSessions"]

_BATCH = 500
"""Records per append when a fork copies a history (one transaction each)."""


class DatabaseSessions:
    """`SessionManager`'s operations on a database storage (async: the database is)."""

    def __init__(self, storage: Storage, sessions_dir: Path) -> None:
        self.storage = storage
        self.sessions_dir = sessions_dir

    @property
    def where(self) -> str:
        return self.storage.url

    def folder(self, session_id: str) -> Path:
        return self.sessions_dir / validate_session_id(session_id)

    async def exists(self, session_id: str) -> bool:
        """A session holds records in the database, or was created (or forked) and not run yet."""
        if await self._metadata(session_id):
            return True
        return any(s.session_id == session_id for s in await self.storage.history.sessions())

    async def require(self, session_id: str) -> None:
        if not await self.exists(session_id):
            raise SessionNotFoundError(f"no session {session_id!r} in {self.where}")

    # -- reading --------------------------------------------------------------------------------------------------

    async def list(self) -> list[SessionInfo]:
        """Every session: from the database's catalogue (one query, whatever the sessions hold) and the sessions'
        metadata (one more)."""
        entries = await self._catalog(None)
        metadata = await anyio.to_thread.run_sync(self._all_metadata)
        infos = [self._info(i, entries.get(i), metadata.get(i, {})) for i in sorted(entries.keys() | metadata.keys())]
        infos.sort(key=lambda info: info.last_active, reverse=True)
        return infos

    async def get(self, session_id: str) -> SessionInfo:
        entries = await self._catalog([validate_session_id(session_id)])
        metadata = await self._metadata(session_id)
        if not entries and not metadata:
            raise SessionNotFoundError(f"no session {session_id!r} in {self.where}")
        return self._info(session_id, entries.get(session_id), metadata)

    async def resume(self, session_id: str) -> list[ModelMessage]:
        await self.require(session_id)
        return await self.storage.history.session(session_id).load()

    async def history_until(self, session_id: str, message_id: str | None) -> list[ModelMessage]:
        await self.require(session_id)
        store = self.storage.history.session(session_id)
        if message_id is None:
            return await store.load()
        return history_in_records(await store.load_all(), message_id, self._session_where(session_id))

    # -- writing --------------------------------------------------------------------------------------------------

    async def create(self, session_id: str) -> SessionInfo:
        validate_session_id(session_id)
        await self._refuse_existing(session_id)
        metadata = {"id": session_id, "created": now()}
        await self._new_session(session_id, metadata)
        return self._info(session_id, None, metadata)

    async def fork(self, session_id: str, at_message_id: str | None, new_id: str) -> SessionInfo:
        """Copy the records up to `at_message_id` (every version of each, summaries, their search texts) into a
        new session `new_id`, and the side folders; the source is not changed."""
        await self.require(session_id)
        validate_session_id(new_id)
        source = self.storage.history.session(session_id)
        records = await source.load_all()
        if at_message_id is not None:
            records = cut_records(records, at_message_id, self._session_where(session_id))
        kept = {get_message_id(m) for m in records}
        versions = [m for m in await source.load_versions() if get_message_id(m) in kept]
        texts = {k: v for k, v in (await source.search_texts()).items() if k in kept}
        await self._refuse_existing(new_id)
        point = at_message_id or (get_message_id(records[-1]) if records else None)
        target = await self._new_session(
            new_id, {"id": new_id, "created": now(), "forked_from": f"{session_id}@{point or ''}"}
        )
        try:
            await anyio.to_thread.run_sync(copy_side_dirs, self.folder(session_id), target)
            await _copy_records(self.storage, new_id, versions, texts)
        except BaseException:
            await self._remove(new_id)  # nothing half-made is left behind
            raise
        return await self.get(new_id)

    async def checkpoint_message(self, session_id: str, checkpoint_id: str) -> str | None:
        await self.require(session_id)
        checkpoint = await anyio.to_thread.run_sync(self.storage.checkpoints(session_id).get, checkpoint_id)
        return checkpoint.message_id

    async def delete(self, session_id: str) -> None:
        """The session's records, search texts and checkpoints in the database, and its folder on this host."""
        await self.require(session_id)
        await self._remove(session_id)

    # -- internals ------------------------------------------------------------------------------------------------

    def _session_where(self, session_id: str) -> str:
        return f"session {session_id!r} of {self.where}"

    async def _refuse_existing(self, session_id: str) -> None:
        if await self.exists(session_id):
            raise SessionExistsError(f"a session {session_id!r} exists already in {self.where}")

    async def _new_session(self, session_id: str, metadata: dict[str, str]) -> Path:
        """Record the new session's metadata (one winner when two hosts create one id). Its folder on this host is
        made only when something has to live there (an evicted output, a plan; `session.json` when the database
        keeps no metadata)."""
        store = self.storage.session_metadata
        if store is None:
            folder = new_folder(self.sessions_dir, session_id, self.where)
            write_metadata(folder, metadata)
            return folder
        if not await anyio.to_thread.run_sync(store.create, session_id, metadata):
            raise SessionExistsError(f"a session {session_id!r} exists already in {self.where}")
        return self.folder(session_id)

    async def _remove(self, session_id: str) -> None:
        """The session's records, search texts, checkpoints and metadata, and its folder on this host."""
        await self.storage.history.delete_session(session_id)
        checkpoints, metadata = self.storage.checkpoints(session_id), self.storage.session_metadata

        def remove() -> None:
            for checkpoint in checkpoints.list():
                checkpoints.delete(checkpoint.id)
            if metadata is not None:
                metadata.delete(session_id)
            folder = self.folder(session_id)
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder)

        await anyio.to_thread.run_sync(remove)

    async def _metadata(self, session_id: str) -> dict[str, str]:
        """The session's metadata: the database's, else a `session.json` on this host (`{}`: none)."""
        store, folder = self.storage.session_metadata, self.folder(session_id)
        found = await anyio.to_thread.run_sync(store.get, session_id) if store is not None else None
        if found is not None:
            return found
        return {k: v for k, v in (await anyio.to_thread.run_sync(read_metadata, folder)).items() if isinstance(v, str)}

    def _all_metadata(self) -> dict[str, dict[str, str]]:
        """Every session's metadata: the database's, else a `session.json` on this host (sessions created or forked
        that may have no record yet)."""
        found: dict[str, dict[str, str]] = {}
        try:
            local = [p.parent for p in self.sessions_dir.glob(f"*/{METADATA_FILE}") if p.is_file()]
        except OSError:
            local = []
        for folder in local:
            found[folder.name] = {k: v for k, v in read_metadata(folder).items() if isinstance(v, str)}
        store = self.storage.session_metadata
        if isinstance(store, _ListsAll):
            found.update(store.items())
        elif store is not None:
            found.update((i, data) for i in store.ids() if (data := store.get(i)) is not None)
        return found

    async def _catalog(self, session_ids: list[str] | None) -> dict[str, SessionCatalog]:
        """The catalogue entries of the sessions holding records (all, or `session_ids`)."""
        history = self.storage.history
        if isinstance(history, _Catalogued):
            return {entry.session_id: entry for entry in await history.catalog(session_ids)}
        entries: dict[str, SessionCatalog] = {}  # another HistoryDatabase: its records folded here
        for summary in await history.sessions():
            if session_ids is None or summary.session_id in session_ids:
                versions = await history.session(summary.session_id).load_versions()
                fold = fold_records((get_message_id(m), m) for m in versions)
                entries[summary.session_id] = fold.entry(
                    summary.session_id,
                    size_bytes=summary.size_bytes,
                    created_at=summary.created_at,
                    updated_at=summary.updated_at,
                )
        return entries

    def _info(self, session_id: str, entry: SessionCatalog | None, metadata: dict[str, str]) -> SessionInfo:
        if entry is None:  # created (or forked from nothing), never run
            entry = SessionCatalog(session_id, 0, 0, None, None, None, CostTotals(), 0, None, None)
        folder = self.sessions_dir / session_id  # an id the database holds: validated when it was written
        return session_info(entry, folder, metadata, created=datetime.now(UTC), history_url=self.where)


@runtime_checkable
class _Catalogued(Protocol):
    """A `HistoryDatabase` keeping a catalogue of its sessions (SQLite, PostgreSQL, a folder of messages.json)."""

    async def catalog(self, session_ids: Sequence[str] | None = None) -> list[SessionCatalog]: ...


@runtime_checkable
class _ListsAll(Protocol):
    """A `SessionMetadataStore` that reads every session's metadata at once (SQLite, PostgreSQL)."""

    def items(self) -> dict[str, dict[str, str]]: ...


async def _copy_records(storage: Storage, session_id: str, versions: list[ModelMessage], texts: dict[str, str]) -> None:
    store = storage.history.session(session_id)
    for start in range(0, len(versions), _BATCH):
        await store.append(versions[start : start + _BATCH])
    for message_id, text in texts.items():
        await store.add_search_text(message_id, text)
