"""`SessionManager`: create, list, resume, fork and delete the sessions under one base directory, or of a
database store (`_database.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio.to_thread
from pydantic_ai.messages import ModelMessage

from summarization_pydantic_ai import InvalidSessionIdError, JsonHistoryStore, get_message_id, validate_session_id
from summarization_pydantic_ai.store._json_search import load_search_texts, save_search_texts

from ..backends import CompositeBackend, LocalBackend
from ..checkpoints._store import FileCheckpointStore
from ..deps import DEFAULT_BASE_DIR, EVICTED_OUTPUTS_ROUTE, DeepAgentDeps, local_on_first_use, new_session_id
from ._database import DatabaseSessions
from ._folders import SessionExistsError, SessionNotFoundError, copy_side_dirs, new_folder, now, write_metadata
from ._history import history_at, read_working, records_until
from ._info import METADATA_FILE, SessionInfo, describe

__all__ = ["SessionExistsError", "SessionInUseError", "SessionManager", "SessionNotFoundError"]


if TYPE_CHECKING:
    from ..storage import Storage

_T = TypeVar("_T")


class SessionInUseError(RuntimeError):
    """The session's history file is open for writing (a run in this or another process): it cannot be deleted."""


class SessionManager:
    """The sessions under `<base_dir>/sessions/`, whoever wrote them (`create_deep_agent`, a
    `ContextManagerMiddleware` with `messages_path=<base_dir>/sessions/<id>/messages.json`, or the CLI).

    Reading (`list`, `get`, `resume`, `history_until`) never writes: a damaged file is reported, not repaired.

    With `store=` a database URL (`sqlite:///...`, `postgresql://...`) or `Storage`, the histories, checkpoints and
    sessions' metadata are the database's (every host sees them); evicted outputs and plans stay in
    `<base_dir>/sessions/<id>/`. The database is async: inside an event loop use `list_async`, `get_async`,
    `create_async` and `delete_async` (the plain ones block, and work outside an event loop when `store` is a URL).
    A `file://` store is the same as `base_dir`.

    Example:
        ```python
        sessions = SessionManager('.pydantic-deep')
        info = sessions.create()
        result = await agent.run('hi', deps=sessions.deps(info.id))
        history = await sessions.resume(info.id)  # continue later: message_history=history
        ```
    """

    def __init__(
        self, base_dir: str | Path = DEFAULT_BASE_DIR, *, store: str | os.PathLike[str] | Storage | None = None
    ) -> None:
        self.base_dir = Path(base_dir)
        self.storage: Storage | None = None
        """The database storage of `store` (`None`: the file layout under `base_dir`)."""
        self._url: str | None = None
        if store is None:
            return
        from ..storage import Storage, open_storage  # storage -> checkpoints -> sessions: imported when used

        storage = store if isinstance(store, Storage) else open_storage(store)
        if storage.base_dir is not None:  # file://: today's layout under that directory
            self.base_dir = storage.base_dir
            return
        self.storage = storage
        self._url = None if isinstance(store, Storage) else os.fspath(store)

    @property
    def location(self) -> str:
        """Where the histories are: the database's URL (any password redacted), or the sessions directory."""
        return self.storage.url if self.storage is not None else str(self.sessions_dir)

    async def close(self) -> None:
        """Release the database connections of a storage this manager opened from a URL."""
        if self.storage is not None and self._url is not None:
            await self.storage.close()

    @property
    def sessions_dir(self) -> Path:
        return self.base_dir / "sessions"

    def session_dir(self, session_id: str) -> Path:
        """`<base_dir>/sessions/<session_id>` (the id validated: one path component, no `..`, no NUL)."""
        return self.sessions_dir / validate_session_id(session_id)

    # -- reading --------------------------------------------------------------------------------------------------

    def list(self) -> list[SessionInfo]:
        """Every session, most recently active first. A session whose history cannot be read is listed with
        `error` set; a folder holding neither `messages.json` nor `session.json` is not a session."""
        if self.storage is not None:
            return self._blocking(DatabaseSessions.list, "list")
        try:
            folders = sorted(p for p in self.sessions_dir.iterdir() if p.is_dir())
        except FileNotFoundError:
            return []
        infos: list[SessionInfo] = []
        for folder in folders:
            try:
                validate_session_id(folder.name)
            except InvalidSessionIdError:
                continue
            if _is_session(folder):
                infos.append(describe(folder.name, folder))
        infos.sort(key=lambda info: info.last_active, reverse=True)
        return infos

    def get(self, session_id: str) -> SessionInfo:
        """The session's `SessionInfo` (`error` set when its history cannot be read)."""
        if self.storage is not None:
            return self._blocking(lambda db: db.get(session_id), "get")
        return describe(session_id, self._existing(session_id))

    async def list_async(self) -> list[SessionInfo]:
        """`list()`, without blocking the event loop."""
        database = self._database()
        return await database.list() if database else await anyio.to_thread.run_sync(self.list)

    async def get_async(self, session_id: str) -> SessionInfo:
        """`get()`, without blocking the event loop."""
        database = self._database()
        return await database.get(session_id) if database else await anyio.to_thread.run_sync(self.get, session_id)

    async def resume(self, session_id: str) -> list[ModelMessage]:
        """The session's working context (`HistoryStore.load()`): pass it as `message_history`, with
        `deps=manager.deps(session_id)`, to continue the session in the same file."""
        if database := self._database():
            return await database.resume(session_id)
        folder = self._existing(session_id)
        return await anyio.to_thread.run_sync(read_working, folder / "messages.json")

    async def history_until(self, session_id: str, message_id: str | None) -> list[ModelMessage]:
        """The history as the agent had it right after `message_id` (default: now): the original messages up to
        and including it when no compaction happened before it (a point before a compaction gives the
        originals, not the summary); else the latest summary before it, what that summary kept, and what
        followed up to `message_id`."""
        if database := self._database():
            return await database.history_until(session_id, message_id)
        folder = self._existing(session_id)
        return await anyio.to_thread.run_sync(history_at, folder / "messages.json", message_id)

    def deps(self, session_id: str, workspace: str | Path | None = None) -> DeepAgentDeps:
        """`DeepAgentDeps` bound to the session: the run records into its `messages.json`, evicted outputs go to
        its `large_tool_results/`. The file tools work in `workspace` (a real directory), or in memory without.
        With a database store the run records into the database when the agent has `store=manager.storage`
        (`create_deep_agent`); the id is not looked up (use `get_async` to check it)."""
        folder = self.session_dir(session_id) if self.storage is not None else self._existing(session_id)
        if workspace is None:
            return DeepAgentDeps(base_dir=self.base_dir, session_id=session_id)
        # The route keeps its prefix (<session>/large_tool_results/...); the folder is made by the first output
        # evicted (a database session may never need one on this host).
        evicted = local_on_first_use(folder)
        backend = CompositeBackend(LocalBackend(workspace), routes={EVICTED_OUTPUTS_ROUTE: evicted})
        return DeepAgentDeps(backend=backend, base_dir=self.base_dir, session_id=session_id)

    # -- writing --------------------------------------------------------------------------------------------------

    def create(self, session_id: str | None = None) -> SessionInfo:
        """A new, empty session (a new id by default). Refuses an id in use (`SessionExistsError`)."""
        session_id = new_session_id() if session_id is None else session_id
        if self.storage is not None:
            return self._blocking(lambda db: db.create(session_id), "create")
        folder = self._new_folder(session_id)
        write_metadata(folder, {"id": session_id, "created": now()})
        return describe(session_id, folder)

    async def create_async(self, session_id: str | None = None) -> SessionInfo:
        """`create()`, without blocking the event loop."""
        database = self._database()
        if database is None:
            return await anyio.to_thread.run_sync(self.create, session_id)
        return await database.create(new_session_id() if session_id is None else session_id)

    async def fork(self, session_id: str, at_message_id: str | None = None, new_id: str | None = None) -> SessionInfo:
        """A new session whose history is this one's up to and including `at_message_id` (default: the end).

        The fork holds every record up to that point, summaries included, so resuming it gives the history as
        the agent had it there: at a point before a compaction, the original messages (not the summary). The
        evicted outputs and plans are copied (hard links where the file system allows), with the search texts of
        the copied messages (the full text of evicted outputs). The original session is not changed. In a
        database, the fork holds every version of those records and their search texts.
        """
        new_id = new_session_id() if new_id is None else validate_session_id(new_id)
        if database := self._database():
            return await database.fork(session_id, at_message_id, new_id)
        source = self._existing(session_id)
        records = await anyio.to_thread.run_sync(records_until, source / "messages.json", at_message_id)
        target = self._new_folder(new_id)
        point = at_message_id or (get_message_id(records[-1]) if records else None)
        try:
            write_metadata(target, {"id": new_id, "created": now(), "forked_from": f"{session_id}@{point or ''}"})
            await anyio.to_thread.run_sync(_fill_fork, source, target, records)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)  # nothing half-made is left behind
            raise
        return describe(new_id, target)

    async def rewind(self, session_id: str, checkpoint_id: str, new_id: str | None = None) -> SessionInfo:
        """A new session holding the history at one of this session's checkpoints (a fork at its message id):
        continue there with `resume(new.id)` and `deps(new.id)`. The original keeps everything after it."""
        if database := self._database():
            message_id = await database.checkpoint_message(session_id, checkpoint_id)
        else:
            folder = self._existing(session_id)
            message_id = (await anyio.to_thread.run_sync(FileCheckpointStore(folder).get, checkpoint_id)).message_id
        if message_id is None:
            return await self.create_async(new_id)
        return await self.fork(session_id, message_id, new_id)

    def delete(self, session_id: str) -> None:
        """Remove the session's directory (history, evicted outputs, checkpoints). Refused while another process
        writes its history (`SessionInUseError`), and for a session directory that is a symbolic link. This
        process's writer of the file is closed first: do not delete a session while one of your runs uses it.
        In a database: its records, search texts and checkpoints (a database has no writer lock to ask)."""
        if self.storage is not None:
            return self._blocking(lambda db: db.delete(session_id), "delete")
        folder = self._existing(session_id)
        if folder.is_symlink():
            raise SessionInUseError(f"{folder} is a symbolic link; remove it yourself if you mean to")
        messages_path = folder / "messages.json"
        writer = JsonHistoryStore.reader(messages_path)
        if writer is JsonHistoryStore.reader(messages_path):  # this process's writer: release its lock first
            writer.close()
        with _unless_in_use(messages_path):
            shutil.rmtree(folder)

    async def delete_async(self, session_id: str) -> None:
        """`delete()`, without blocking the event loop."""
        database = self._database()
        if database is None:
            return await anyio.to_thread.run_sync(self.delete, session_id)
        return await database.delete(session_id)

    # -- internals ------------------------------------------------------------------------------------------------

    def _database(self) -> DatabaseSessions | None:
        return None if self.storage is None else DatabaseSessions(self.storage, self.sessions_dir)

    def _blocking(self, operation: Callable[[DatabaseSessions], Awaitable[_T]], name: str) -> _T:
        """Run a database operation from sync code: on a connection of its own (a database handle belongs to the
        event loop that opened it), so only outside an event loop and with the store's URL."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                f"SessionManager.{name}() would block the event loop on {self.location}: use await "
                f"manager.{name}_async()"
            )
        url = self._url
        if url is None:
            raise RuntimeError(f"SessionManager.{name}() on a Storage object: use await manager.{name}_async()")

        from ..storage import open_storage

        async def call() -> _T:
            storage = open_storage(url)
            try:
                return await operation(DatabaseSessions(storage, self.sessions_dir))
            finally:
                await storage.close()

        return anyio.run(call)

    def _existing(self, session_id: str) -> Path:
        folder = self.session_dir(session_id)
        if not _is_session(folder):
            raise SessionNotFoundError(
                f"no session {session_id!r} in {self.sessions_dir} (no {folder.name}/messages.json there)"
            )
        return folder

    def _new_folder(self, session_id: str) -> Path:
        return new_folder(self.sessions_dir, validate_session_id(session_id), str(self.sessions_dir))


def _is_session(folder: Path) -> bool:
    return (folder / "messages.json").is_file() or (folder / METADATA_FILE).is_file()


def _fill_fork(source: Path, target: Path, records: list[ModelMessage]) -> None:
    """Write the fork's history through the store (its format and checksums) with the search texts of its
    messages (the full text of evicted outputs), then copy the side directories."""
    if records:
        store = JsonHistoryStore(target / "messages.json", fsync=True)
        try:
            store.append_sync(records)
        finally:
            store.close()
        kept = {get_message_id(message) for message in records}
        texts = {k: v for k, v in load_search_texts(source / "messages.json").items() if k in kept}
        if texts:
            save_search_texts(target / "messages.json", texts)
    copy_side_dirs(source, target)


@contextlib.contextmanager
def _unless_in_use(messages_path: Path) -> Generator[None]:
    """Hold the history file's writer lock (the store's `flock`) while deleting, so no run is writing it."""
    try:
        handle = messages_path.open("rb")
    except FileNotFoundError:
        yield
        return
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SessionInUseError(
                f"{messages_path} is open for writing (a run of this session is in progress); finish it first"
            ) from None
        yield
