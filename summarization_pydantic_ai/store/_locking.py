"""The writer's lock: an exclusive `flock` on the data file itself, and atomic rewrites that keep it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path
from typing import BinaryIO

from ._protocol import HistoryStoreLockedError

__all__ = ["acquire_lock", "is_json_array", "write_atomically"]


def _pid_file(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def acquire_lock(path: Path, timeout: float) -> BinaryIO:
    """`path`, opened for writing and exclusively `flock`ed. Retried when the path was replaced or deleted
    meanwhile, so the lock held is always on the file the path names: deleting a file cannot let a second
    writer in. `messages.json.lock` only tells the holder's pid (for the error message)."""
    deadline = time.monotonic() + timeout
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        handle = os.fdopen(fd, "r+b")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            if time.monotonic() >= deadline:
                raise _locked_error(path) from None
            time.sleep(0.02)
            continue
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            with contextlib.suppress(OSError):
                _pid_file(path).write_text(str(os.getpid()))
            return handle
        handle.close()  # the path now names another file: lock that one


def _locked_error(path: Path) -> HistoryStoreLockedError:
    try:
        owner = _pid_file(path).read_text(errors="replace").strip() or "unknown"
    except OSError:
        owner = "unknown"
    if owner == str(os.getpid()):
        return HistoryStoreLockedError(
            f"{path} is already open in this process; share it with JsonHistoryStore.open(path)"
        )
    return HistoryStoreLockedError(
        f"{path} is being written by another process (pid {owner}); use one writer per session, or wait for it "
        f"with JsonHistoryStore(path, lock_timeout=seconds)"
    )


def write_atomically(path: Path, data: bytes) -> BinaryIO:
    """Replace `path` by a file holding `data` (temporary file, fsync, rename). The new file is locked before it
    takes the path, so the writer's lock never lapses; its handle is returned."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    handle = os.fdopen(fd, "r+b")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        handle.write(data)
        handle.flush()
        os.fsync(fd)
        os.replace(temporary, path)
    except BaseException:
        handle.close()
        raise
    return handle


def is_json_array(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), list)
    except ValueError:
        return False
