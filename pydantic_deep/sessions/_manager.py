"""`SessionManager`: create, list, resume, fork and delete the sessions under one base directory."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Generator
from datetime import UTC, datetime
from pathlib import Path

import anyio.to_thread
from pydantic_ai.messages import ModelMessage

from summarization_pydantic_ai import InvalidSessionIdError, JsonHistoryStore, get_message_id, validate_session_id

from ..backends import CompositeBackend, LocalBackend
from ..checkpoints._store import FileCheckpointStore
from ..deps import DEFAULT_BASE_DIR, EVICTED_OUTPUTS_ROUTE, DeepAgentDeps, new_session_id
from ._history import history_at, read_working, records_until
from ._info import METADATA_FILE, SessionInfo, describe

__all__ = ["SessionExistsError", "SessionInUseError", "SessionManager", "SessionNotFoundError"]

_COPIED_DIRS = ("large_tool_results", "plans")
"""What a fork takes along besides the history: the evicted outputs its previews point at, and the plans."""


class SessionNotFoundError(LookupError):
    """No session with that id under the base directory."""


class SessionExistsError(FileExistsError):
    """A session with that id exists already (`create` and `fork` never write into an existing session)."""


class SessionInUseError(RuntimeError):
    """The session's history file is open for writing (a run in this or another process): it cannot be deleted."""


class SessionManager:
    """The sessions under `<base_dir>/sessions/`, whoever wrote them (`create_deep_agent`, a
    `ContextManagerMiddleware` with `messages_path=<base_dir>/sessions/<id>/messages.json`, or the CLI).

    Reading (`list`, `get`, `resume`, `history_until`) never writes: a damaged file is reported, not repaired.

    Example:
        ```python
        sessions = SessionManager('.pydantic-deep')
        info = sessions.create()
        result = await agent.run('hi', deps=sessions.deps(info.id))
        history = await sessions.resume(info.id)  # continue later: message_history=history
        ```
    """

    def __init__(self, base_dir: str | Path = DEFAULT_BASE_DIR) -> None:
        self.base_dir = Path(base_dir)

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
        return describe(session_id, self._existing(session_id))

    async def resume(self, session_id: str) -> list[ModelMessage]:
        """The session's working context (`HistoryStore.load()`): pass it as `message_history`, with
        `deps=manager.deps(session_id)`, to continue the session in the same file."""
        folder = self._existing(session_id)
        return await anyio.to_thread.run_sync(read_working, folder / "messages.json")

    async def history_until(self, session_id: str, message_id: str | None) -> list[ModelMessage]:
        """The history as the agent had it right after `message_id` (default: now): the original messages up to
        and including it when no compaction happened before it (a point before a compaction gives the
        originals, not the summary); else the latest summary before it, what that summary kept, and what
        followed up to `message_id`."""
        folder = self._existing(session_id)
        return await anyio.to_thread.run_sync(history_at, folder / "messages.json", message_id)

    def deps(self, session_id: str, workspace: str | Path | None = None) -> DeepAgentDeps:
        """`DeepAgentDeps` bound to the session: the run records into its `messages.json`, evicted outputs go to
        its `large_tool_results/`. The file tools work in `workspace` (a real directory), or in memory without."""
        folder = self._existing(session_id)
        if workspace is None:
            return DeepAgentDeps(base_dir=self.base_dir, session_id=session_id)
        evicted = LocalBackend(folder)  # the route keeps its prefix: <session>/large_tool_results/...
        backend = CompositeBackend(LocalBackend(workspace), routes={EVICTED_OUTPUTS_ROUTE: evicted})
        return DeepAgentDeps(backend=backend, base_dir=self.base_dir, session_id=session_id)

    # -- writing --------------------------------------------------------------------------------------------------

    def create(self, session_id: str | None = None) -> SessionInfo:
        """A new, empty session (a new id by default). Refuses an id in use (`SessionExistsError`)."""
        session_id = new_session_id() if session_id is None else session_id
        folder = self._new_folder(session_id)
        _write_metadata(folder, {"id": session_id, "created": _now()})
        return describe(session_id, folder)

    async def fork(self, session_id: str, at_message_id: str | None = None, new_id: str | None = None) -> SessionInfo:
        """A new session whose history is this one's up to and including `at_message_id` (default: the end).

        The fork holds every record up to that point, summaries included, so resuming it gives the history as
        the agent had it there: at a point before a compaction, the original messages (not the summary). The
        evicted outputs and plans are copied (hard links where the file system allows). The original session is
        not changed.
        """
        source = self._existing(session_id)
        new_id = new_session_id() if new_id is None else validate_session_id(new_id)
        records = await anyio.to_thread.run_sync(records_until, source / "messages.json", at_message_id)
        target = self._new_folder(new_id)
        point = at_message_id or (get_message_id(records[-1]) if records else None)
        try:
            _write_metadata(target, {"id": new_id, "created": _now(), "forked_from": f"{session_id}@{point or ''}"})
            await anyio.to_thread.run_sync(_fill_fork, source, target, records)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)  # nothing half-made is left behind
            raise
        return describe(new_id, target)

    async def rewind(self, session_id: str, checkpoint_id: str, new_id: str | None = None) -> SessionInfo:
        """A new session holding the history at one of this session's checkpoints (a fork at its message id):
        continue there with `resume(new.id)` and `deps(new.id)`. The original keeps everything after it."""
        folder = self._existing(session_id)
        checkpoint = await anyio.to_thread.run_sync(FileCheckpointStore(folder).get, checkpoint_id)
        if checkpoint.message_id is None:
            return self.create(new_id)
        return await self.fork(session_id, checkpoint.message_id, new_id)

    def delete(self, session_id: str) -> None:
        """Remove the session's directory (history, evicted outputs, checkpoints). Refused while another process
        writes its history (`SessionInUseError`), and for a session directory that is a symbolic link. This
        process's writer of the file is closed first: do not delete a session while one of your runs uses it."""
        folder = self._existing(session_id)
        if folder.is_symlink():
            raise SessionInUseError(f"{folder} is a symbolic link; remove it yourself if you mean to")
        messages_path = folder / "messages.json"
        writer = JsonHistoryStore.reader(messages_path)
        if writer is JsonHistoryStore.reader(messages_path):  # this process's writer: release its lock first
            writer.close()
        with _unless_in_use(messages_path):
            shutil.rmtree(folder)

    # -- internals ------------------------------------------------------------------------------------------------

    def _existing(self, session_id: str) -> Path:
        folder = self.session_dir(session_id)
        if not _is_session(folder):
            raise SessionNotFoundError(
                f"no session {session_id!r} in {self.sessions_dir} (no {folder.name}/messages.json there)"
            )
        return folder

    def _new_folder(self, session_id: str) -> Path:
        folder = self.session_dir(session_id)
        self.sessions_dir.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir()
        except FileExistsError:
            raise SessionExistsError(f"a session {session_id!r} exists already in {self.sessions_dir}") from None
        return folder


def _is_session(folder: Path) -> bool:
    return (folder / "messages.json").is_file() or (folder / METADATA_FILE).is_file()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _write_metadata(folder: Path, data: dict[str, str]) -> None:
    (folder / METADATA_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _fill_fork(source: Path, target: Path, records: list[ModelMessage]) -> None:
    """Write the fork's history through the store (its format and checksums), then copy the side directories."""
    if records:
        store = JsonHistoryStore(target / "messages.json", fsync=True)
        try:
            store.append_sync(records)
        finally:
            store.close()
    for name in _COPIED_DIRS:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, copy_function=_link_or_copy, symlinks=True)


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link (instant, no space) where possible: evicted outputs are written once and never edited."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


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
