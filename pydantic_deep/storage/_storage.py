"""`Storage`: histories, memories and checkpoints for one URL; `open_storage(url)` and `migrate(src, dst)`.

- `file:///path/.pydantic-deep` (or a plain path): today's layout under that base directory;
- `sqlite:///path/history.db`: everything in one SQLite file;
- `postgresql://...`: one PostgreSQL database (`pydantic_deep.storage._postgres`, imported only then).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio.to_thread

from summarization_pydantic_ai.store import (
    CopyReport,
    HistoryDatabase,
    JsonHistoryDatabase,
    copy_sessions,
    store_kind,
    validate_session_id,
)
from summarization_pydantic_ai.store import open_database as open_history_database
from summarization_pydantic_ai.store._url import import_postgres_support

from ..checkpoints._store import FileCheckpointStore
from ._file import FileMemoryStore
from ._protocols import CheckpointStore, MemoryStore, SessionMetadataStore, StorageError
from ._sqlite import SQLiteCheckpointStore, SQLiteHarnessTables, SQLiteMemoryStore, SQLiteSessionMetadataStore

__all__ = ["MigrationReport", "Storage", "migrate", "open_storage"]

STORE_ENV = "PYDANTIC_DEEP_STORE"
"""The environment variable the CLI reads a store URL from when `--store` is not given."""


@dataclass
class Storage:
    """Where an agent's sessions live: their histories, the agents' memories and the sessions' checkpoints."""

    url: str
    """Where (any password redacted)."""
    history: HistoryDatabase
    memory: MemoryStore
    checkpoint_store: Callable[[str], CheckpointStore]
    base_dir: Path | None = None
    """The base directory of a `file://` storage (sessions under `<base_dir>/sessions/`); `None` for databases."""
    on_close: list[Callable[[], Any]] = field(default_factory=list[Callable[[], Any]])
    session_metadata: SessionMetadataStore | None = None
    """Where `SessionManager` records sessions' creation time and fork origin, for every host (a database's
    `deep_sessions` table); `None`: `session.json` in the session's folder (`file://`)."""

    def checkpoints(self, session_id: str) -> CheckpointStore:
        """The checkpoints of one session."""
        return self.checkpoint_store(validate_session_id(session_id))

    async def close(self) -> None:
        await self.history.close()
        for close in self.on_close:
            await anyio.to_thread.run_sync(close)


def open_storage(url: str | os.PathLike[str], **options: Any) -> Storage:
    """The storage at `url` (nothing is connected or created before first use). `options` go to the history
    database (see `summarization_pydantic_ai.open_database`)."""
    text = os.fspath(url)
    kind = store_kind(text)
    if kind == "file":
        history = cast(JsonHistoryDatabase, open_history_database(_as_sessions_url(text), **options))
        base = history.root.parent
        return Storage(
            base.as_uri(),
            history,
            FileMemoryStore(base),
            lambda session_id: FileCheckpointStore(history.root / session_id),
            base_dir=base,
        )
    if kind == "sqlite":
        history = open_history_database(text, **options)
        tables = SQLiteHarnessTables(Path(getattr(history, "path")))  # noqa: B009 (SQLiteHistoryDatabase.path)
        return Storage(
            history.url,
            history,
            SQLiteMemoryStore(tables),
            lambda session_id: SQLiteCheckpointStore(tables, session_id),
            on_close=[tables.close],
            session_metadata=SQLiteSessionMetadataStore(tables),
        )
    module = import_postgres_support(f"{__package__}._postgres", text)
    return cast(Storage, module.open_postgres_storage(text, **options))


def _as_sessions_url(url: str) -> str:
    """A `file://` storage URL names the base directory; its histories are in `sessions/` below it."""
    if url.lower().startswith("file://"):
        return url.rstrip("/") + "/sessions"
    return str(Path(url) / "sessions")


@dataclass
class MigrationReport:
    """What `migrate` copied."""

    history: CopyReport
    memories: list[str]
    checkpoints: dict[str, int]

    def summary(self) -> str:
        records = sum(self.history.records.values())
        skipped = sum(self.history.skipped.values())
        return (
            f"{self.history.sessions} sessions ({records} records copied, {skipped} already there), "
            f"{len(self.memories)} memories, {sum(self.checkpoints.values())} checkpoints"
        )


async def migrate(
    source: str | os.PathLike[str] | Storage,
    destination: str | os.PathLike[str] | Storage,
    session_ids: Sequence[str] | None = None,
) -> MigrationReport:
    """Copy sessions (every record, versions and summaries, search texts), their checkpoints, and the agents'
    memories from `source` to `destination`, losslessly. Running it again copies nothing new; a destination session
    or memory that differs from the source's raises `HistoryStoreError`/`StorageError` and is left as it is."""
    src = source if isinstance(source, Storage) else open_storage(source)
    dst = destination if isinstance(destination, Storage) else open_storage(destination)
    try:
        history = await copy_sessions(src.history, dst.history, session_ids)
        checkpoints: dict[str, int] = {}
        for session_id in history.records:
            source_checkpoints = await anyio.to_thread.run_sync(src.checkpoints(session_id).list)
            target = dst.checkpoints(session_id)
            for checkpoint in source_checkpoints:
                await anyio.to_thread.run_sync(target.save, checkpoint)
            checkpoints[session_id] = len(source_checkpoints)
        await anyio.to_thread.run_sync(_copy_metadata, src, dst, list(history.records))
        memories = await _copy_memories(src.memory, dst.memory)
        return MigrationReport(history, memories, checkpoints)
    finally:
        for storage, given in ((src, source), (dst, destination)):
            if not isinstance(given, Storage):
                await storage.close()


def _metadata_of(storage: Storage, session_id: str) -> dict[str, str] | None:
    if storage.session_metadata is not None:
        return storage.session_metadata.get(session_id)
    if storage.base_dir is None:
        return None
    try:  # the file layout's session.json (SessionManager writes it)
        data = json.loads((storage.base_dir / "sessions" / session_id / "session.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in cast(dict[str, Any], data).items()} if isinstance(data, dict) else None


def _copy_metadata(src: Storage, dst: Storage, session_ids: list[str]) -> None:
    """Sessions' creation time and fork origin; a destination that has some already keeps them."""
    for session_id in session_ids:
        data = _metadata_of(src, session_id)
        if data is None or _metadata_of(dst, session_id) is not None:
            continue
        if dst.session_metadata is not None:
            dst.session_metadata.create(session_id, data)
        elif dst.base_dir is not None:
            folder = dst.base_dir / "sessions" / session_id
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "session.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


async def _copy_memories(src: MemoryStore, dst: MemoryStore) -> list[str]:
    names = await src.names()
    for name in names:
        content = await src.read(name)
        if content is None:
            continue
        present = await dst.read(name)
        if present == content:
            continue
        if present is not None or not await dst.compare_and_swap(name, None, content):
            raise StorageError(
                f"the memory of agent {name!r} exists in {dst.url} with other content; merge it by hand or delete it"
            )
    return names
