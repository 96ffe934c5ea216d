"""Host-side file operations of `LocalBackend`: which kinds of file it touches, opening and reading a regular file
without ever blocking on a FIFO, writing one atomically, and OS errors named by virtual path."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat as stat_module

from ._protocol import BackendError, PathEscapeError, normalize_path

__all__ = ["check_regular", "open_regular", "read_regular", "translate", "write_atomic"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

_KINDS = {
    stat_module.S_IFIFO: "a FIFO (named pipe)",
    stat_module.S_IFSOCK: "a socket",
    stat_module.S_IFCHR: "a character device",
    stat_module.S_IFBLK: "a block device",
}


def check_regular(mode: int, vpath: str) -> None:
    """Nothing for a regular file; `IsADirectoryError` for a directory; `BackendError` naming any other kind."""
    if stat_module.S_ISREG(mode):
        return
    if stat_module.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", vpath)
    kind = _KINDS.get(stat_module.S_IFMT(mode), "not a regular file")
    raise BackendError(
        f"{vpath} is {kind}, not a regular file: the file tools only read, edit and write regular files, so it was "
        "left alone"
    )


def translate(exc: OSError, path: str) -> OSError:
    """The same kind of error naming the virtual path, never the host path (which the model must not see)."""
    try:
        vpath = normalize_path(path)
    except PathEscapeError:  # pragma: no cover - normalize_path already ran before any I/O
        vpath = "?"
    if exc.filename == vpath:
        return exc
    if exc.errno == errno.ENAMETOOLONG:
        return PathEscapeError(f"{vpath}: name too long for the file system")
    if exc.errno == errno.ELOOP:
        return PathEscapeError(f"{vpath}: too many levels of symbolic links")
    return OSError(exc.errno, exc.strerror or type(exc).__name__, vpath)  # OSError() picks the errno's subclass


def open_regular(vpath: str, real: str) -> int:
    """A read-only descriptor of the regular file `real`; a directory, FIFO, socket or device is refused.

    The type is checked before opening, and the open itself never blocks (`O_NONBLOCK`: a FIFO swapped in
    meanwhile opens at once and is refused by the second check).
    """
    check_regular(os.stat(real).st_mode, vpath)
    fd = os.open(real, os.O_RDONLY | _NOFOLLOW | _BINARY | _NONBLOCK)
    try:
        check_regular(os.fstat(fd).st_mode, vpath)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(vpath: str, real: str) -> bytes:
    """The bytes of the regular file `real` (see `open_regular`)."""
    with os.fdopen(open_regular(vpath, real), "rb") as file:
        return file.read()


def write_atomic(root: str, vpath: str, real: str, data: bytes) -> None:
    """Write atomically: a temporary file next to the target, then `os.replace` (a crash leaves old or new)."""
    directory, name = os.path.split(real)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        mode = None
    else:
        check_regular(st.st_mode, vpath)  # never replace a directory, FIFO, socket or device
        mode = stat_module.S_IMODE(st.st_mode)
    _make_parents(root, vpath, directory)
    short = os.fsdecode(os.fsencode(name)[:200])  # the temporary name stays within 255 bytes
    temp = os.path.join(directory, f".{short}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY, 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _make_parents(root: str, vpath: str, directory: str) -> None:
    """`os.makedirs` for a directory inside the root, without its recursion (trees may be very deep)."""
    if os.path.isdir(directory):
        return
    current = root
    for part in os.path.relpath(directory, root).split(os.sep):
        current = os.path.join(current, part)
        try:
            os.mkdir(current)
        except FileExistsError:
            if not os.path.isdir(current):
                raise NotADirectoryError(errno.ENOTDIR, "A parent of this path is a file", vpath) from None
