"""`FileCheckpointStore`: a session's checkpoints, pointers into its history, in one small `checkpoints.json`."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

__all__ = [
    "CHECKPOINTS_FILE",
    "Checkpoint",
    "CheckpointError",
    "CheckpointNotFoundError",
    "FileCheckpointStore",
    "InvalidCheckpointIdError",
    "validate_checkpoint_id",
]

logger = logging.getLogger("pydantic_deep.checkpoints")

CHECKPOINTS_FILE = "checkpoints.json"
_FORMAT = 1
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    """One lock per file in the process, shared by every store instance of that file."""
    with _locks_guard:
        return _locks.setdefault(os.path.abspath(path), threading.Lock())


class CheckpointError(RuntimeError):
    """A checkpoints file cannot be read or written."""


class CheckpointNotFoundError(LookupError):
    """No checkpoint with that id in the session."""


class InvalidCheckpointIdError(ValueError):
    """A checkpoint id that is not 1-64 letters, digits, `-` or `_` (so `../evil` never reaches a file system)."""


def validate_checkpoint_id(checkpoint_id: object) -> str:
    """`checkpoint_id` if it is 1-64 ASCII letters, digits, `-` or `_`; else `InvalidCheckpointIdError`."""
    if not isinstance(checkpoint_id, str) or not _ID.fullmatch(checkpoint_id):
        raise InvalidCheckpointIdError(
            f"invalid checkpoint id {str(checkpoint_id)[:80]!r}: use 1-64 letters, digits, '-' or '_'"
        )
    return checkpoint_id


@dataclass(frozen=True)
class Checkpoint:
    """A point of a session's history to come back to: a message id, not a copy of the messages."""

    id: str
    session_id: str
    name: str | None
    message_id: str | None
    """The id of the last message of the history at the snapshot (`None`: the history was empty)."""
    message_count: int
    """Messages in the working history at the snapshot."""
    created: datetime
    auto: bool
    """Taken by `CheckpointMiddleware` (per turn or per tool call), not asked for by name."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "name": self.name,
            "message_id": self.message_id,
            "message_count": self.message_count,
            "created": self.created.isoformat(),
            "auto": self.auto,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Checkpoint:
        return cls(
            id=validate_checkpoint_id(data["id"]),
            session_id=str(data["session_id"]),
            name=data.get("name"),
            message_id=data.get("message_id"),
            message_count=int(data["message_count"]),
            created=datetime.fromisoformat(data["created"]),
            auto=bool(data["auto"]),
        )


class FileCheckpointStore:
    """The checkpoints of one session: `<session_dir>/checkpoints.json`.

    Each checkpoint is a pointer (a message id) into the session's history, so saving and pruning cost the same
    on a 10-message and a 10,000-message session: the file holds only the checkpoints (a few hundred bytes
    each). Every change rewrites it atomically: the new version is written to a temporary file (flushed to disk
    first with `fsync=True`), the current one is kept as `checkpoints.json.bak`, and the new one renamed into
    place. A crash leaves the previous checkpoints or the new ones, never a torn file. One writer per session
    (the history store's lock already keeps a second process from running the same session); within a process,
    changes are serialized.

    Example:
        ```python
        store = FileCheckpointStore('.pydantic-deep/sessions/abc')
        for checkpoint in store.list():
            print(checkpoint.id, checkpoint.name, checkpoint.message_count)
        ```
    """

    def __init__(self, session_dir: str | Path, *, fsync: bool = False) -> None:
        self.session_dir = Path(session_dir)
        self.fsync = fsync
        """fsync the new file before the rename (survives power loss, not just a killed process; costs one disk
        flush, several ms on many disks). Off by default, as for the history store it points into."""
        self.path = self.session_dir / CHECKPOINTS_FILE
        self.backup = self.session_dir / (CHECKPOINTS_FILE + ".bak")
        """The previous version of the file (read when a crash left `path` missing or damaged)."""
        self._lock = _lock_for(self.path)

    @property
    def session_id(self) -> str:
        return self.session_dir.name

    def list(self) -> list[Checkpoint]:
        """The checkpoints, oldest first."""
        with self._lock:
            return self._read()

    def get(self, checkpoint_id: str) -> Checkpoint:
        validate_checkpoint_id(checkpoint_id)
        for checkpoint in self.list():
            if checkpoint.id == checkpoint_id:
                return checkpoint
        raise CheckpointNotFoundError(f"no checkpoint {checkpoint_id!r} in {self.path}")

    def save(self, checkpoint: Checkpoint) -> None:
        """Add `checkpoint` (or replace the one with its id)."""
        validate_checkpoint_id(checkpoint.id)
        with self._lock:
            kept = [c for c in self._read() if c.id != checkpoint.id]
            self._write([*kept, checkpoint])

    def delete(self, checkpoint_id: str) -> None:
        validate_checkpoint_id(checkpoint_id)
        with self._lock:
            checkpoints = self._read()
            kept = [c for c in checkpoints if c.id != checkpoint_id]
            if len(kept) == len(checkpoints):
                raise CheckpointNotFoundError(f"no checkpoint {checkpoint_id!r} in {self.path}")
            self._write(kept)

    def prune(self, keep: int) -> int:
        """Delete the oldest automatic checkpoints beyond the newest `keep`; named checkpoints are never pruned
        (delete them with `delete`). Returns how many were deleted; the file is rewritten only if any were."""
        if keep < 0:
            raise ValueError(f"keep must be >= 0, got {keep}")
        with self._lock:
            checkpoints = self._read()
            auto = [c.id for c in checkpoints if c.auto]
            drop = set(auto[: max(len(auto) - keep, 0)])
            if drop:
                self._write([c for c in checkpoints if c.id not in drop])
            return len(drop)

    # -- file ----------------------------------------------------------------------------------------------------

    def _read(self) -> list[Checkpoint]:
        """The checkpoints file, or the previous version kept beside it when a crash interrupted a rewrite
        (the file missing) or left it damaged."""
        try:
            return _parse(self.path)
        except FileNotFoundError:
            pass
        except CheckpointError as exc:
            if not self.backup.exists():
                raise
            logger.warning("%s; reading the previous version, %s", exc, self.backup.name)
        try:
            return _parse(self.backup)
        except FileNotFoundError:
            return []

    def _write(self, checkpoints: list[Checkpoint]) -> None:
        data = {"format": _FORMAT, "checkpoints": [c.to_json() for c in checkpoints]}
        try:
            self.session_dir.mkdir(parents=True, exist_ok=True)
            write_keeping_previous(self.path, self.backup, json.dumps(data, indent=1).encode(), fsync=self.fsync)
        except OSError as exc:
            raise CheckpointError(f"cannot write {self.path}: {exc}; the previous checkpoints are intact") from exc


def _parse(path: Path) -> list[Checkpoint]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise CheckpointError(f"cannot read {path}: {exc}") from exc
    try:
        items = cast(list[dict[str, Any]], json.loads(raw)["checkpoints"])
        return [Checkpoint.from_json(item) for item in items]
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"{path} is damaged ({type(exc).__name__}: {str(exc)[:200]}); move it away to start over"
        ) from exc


def write_keeping_previous(path: Path, backup: Path, data: bytes, *, fsync: bool) -> None:
    """Replace `path` by `data` so that a crash at any point leaves a complete file: the new contents go to a
    temporary file (fsync'ed if asked), the current file becomes `backup`, the temporary file becomes `path`.

    Each rename targets a free name: replacing an existing file in one rename makes ext4 flush the new file
    (`auto_da_alloc`), several ms per save on many disks; this way a save costs no disk wait unless `fsync`.
    """
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            _write(handle, data)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        if path.exists():  # after an interrupted rewrite it may not: the backup is then the only copy, kept
            with contextlib.suppress(FileNotFoundError):
                os.unlink(backup)
            os.rename(path, backup)
        os.rename(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _write(handle: Any, data: bytes) -> None:
    """The one write of the new contents (a seam for the tests that make it fail midway)."""
    handle.write(data)
