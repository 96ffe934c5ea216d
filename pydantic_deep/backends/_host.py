"""Host-side checks of `LocalBackend`: which kinds of file it touches, and OS errors named by virtual path."""

from __future__ import annotations

import errno
import stat as stat_module

from ._protocol import BackendError, PathEscapeError, normalize_path

__all__ = ["check_regular", "translate"]

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
