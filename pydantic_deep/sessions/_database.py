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
from typing import TYPE_CHECKING

import anyio.to_thread
from pydantic_ai.messages import ModelMessage

from summarization_pydantic_ai import get_message_id, is_summary_message, validate_session_id
from summarization_pydantic_ai.cost import CostLedger
from summarization_pydantic_ai.store import SessionSummary

from ._folders import SessionExistsError, SessionNotFoundError, copy_side_dirs, new_folder, now, write_metadata
from ._history import cut_records, history_in_records
from ._info import METADATA_FILE, SessionInfo, _parse_time, _prompt_of, read_metadata  # pyright: ignore[reportPrivateUsage]

if TYPE_CHECKING:
    from ..storage import Storage

__all__ = ["DatabaseSessions", "describe_records"]

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
        summaries = {s.session_id: s for s in await self.storage.history.sessions()}
        local = await anyio.to_thread.run_sync(self._metadata_ids)
        infos = [
            await self._describe(i, summaries.get(i), await self._metadata(i)) for i in sorted(summaries.keys() | local)
        ]
        infos.sort(key=lambda info: info.last_active, reverse=True)
        return infos

    async def get(self, session_id: str) -> SessionInfo:
        summaries = await self.storage.history.sessions()  # read once: it answers `exists` too
        summary = next((s for s in summaries if s.session_id == session_id), None)
        metadata = await self._metadata(session_id)
        if summary is None and not metadata:
            raise SessionNotFoundError(f"no session {session_id!r} in {self.where}")
        return await self._describe(session_id, summary, metadata)

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
        return await self._describe(session_id, None, metadata)

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

    def _metadata_ids(self) -> set[str]:
        """Sessions created or forked that may have no record yet."""
        store = self.storage.session_metadata
        ids = set(store.ids()) if store is not None else set[str]()
        try:
            local = {p.parent.name for p in self.sessions_dir.glob(f"*/{METADATA_FILE}") if p.is_file()}
        except OSError:
            local = set[str]()
        return ids | local

    async def _describe(self, session_id: str, summary: SessionSummary | None, metadata: dict[str, str]) -> SessionInfo:
        records = await self.storage.history.session(session_id).load_all()
        return describe_records(session_id, self.folder(session_id), records, summary, dict(metadata), self.where)


def describe_records(
    session_id: str,
    folder: Path,
    records: Sequence[ModelMessage],
    summary: SessionSummary | None,
    metadata: dict[str, object],
    url: str,
) -> SessionInfo:
    """The `SessionInfo` of a database session from its records (`load_all()`) and its summary row."""
    messages = [m for m in records if not is_summary_message(m)]
    ledger = CostLedger()
    ledger.add_messages(list(records))
    first_time = next((t for m in messages if (t := getattr(m, "timestamp", None)) is not None), None)
    first_prompt = next((p for m in messages if (p := _prompt_of(m)) is not None), None)
    created = _parse_time(metadata.get("created")) or (summary.created_at if summary else None) or first_time
    created = created or datetime.now(UTC)
    forked_from = metadata.get("forked_from")
    return SessionInfo(
        id=session_id,
        path=folder,
        messages_path=folder / "messages.json",
        created=created,
        last_active=(summary.updated_at if summary else None) or created,
        message_count=len(messages),
        first_prompt=first_prompt,
        size_bytes=summary.size_bytes if summary else 0,
        compactions=len(records) - len(messages),
        forked_from=forked_from if isinstance(forked_from, str) else None,
        cost=ledger.totals(),
        history_url=url,
    )


async def _copy_records(storage: Storage, session_id: str, versions: list[ModelMessage], texts: dict[str, str]) -> None:
    store = storage.history.session(session_id)
    for start in range(0, len(versions), _BATCH):
        await store.append(versions[start : start + _BATCH])
    for message_id, text in texts.items():
        await store.add_search_text(message_id, text)
