"""The catalogue of a messages.json: the sidecar `messages.json.catalog`, a line `<crc32> <inode> <size> <mtime_ns>
<length>` and the session's fold in its two parts (`_catalog`; the checksum covers them all).

The stamp is that of the history the fold describes: the file's inode, size and modification time (ns). It changes
with every append (the size grows), every rewrite (a repair or an import makes a new file) and every truncation; so
a sidecar whose stamp is the history's now describes it exactly.

- The writer (`JsonHistoryStore`) folds the first records of each append into what it holds and rewrites the
  sidecar in place after the records are written (a few microseconds: no rename, no fsync: it is a cache).
- A reader (`read_catalog`) uses the sidecar when its stamp holds; else (missing, torn, of an older file, or one
  append behind after a crash between the two writes) it folds every record again and writes the sidecar
  atomically, so the next read is quick. The writer, holding no fold it can trust, goes on from that sidecar.
"""

from __future__ import annotations

import contextlib
import os
import threading
import zlib
from collections.abc import Container, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from ._appending import NewRecord
from ._catalog import CatalogFold, SessionCatalog, first_versions, fold_records, read_entry
from ._reader import read_records

__all__ = ["FileCatalogWriter", "catalog_path", "read_catalog"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

Stamp = tuple[int, int, int]
"""(inode, size, modification time in ns) of a history file."""


def catalog_path(history: Path) -> Path:
    return history.with_name(history.name + ".catalog")


def _stamp(stat: os.stat_result) -> Stamp:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def read_catalog(history: str | os.PathLike[str], session_id: str | None = None) -> SessionCatalog | None:
    """The catalogue of the messages.json at `history` (`None` when there is no such file): its sidecar when it
    describes the file as it is now, else folded again from the records (and the sidecar written for the next
    read). `session_id` defaults to the name of the file's folder. Sync: call it from a worker thread."""
    path = Path(history)
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    session_id = path.parent.name if session_id is None else session_id
    stamp, updated = _stamp(stat), datetime.fromtimestamp(stat.st_mtime, UTC)
    stored = _read_sidecar(catalog_path(path))
    if stored is not None and stored[0] == stamp:
        entry = read_entry(stored[1], session_id, size_bytes=stat.st_size, created_at=None, updated_at=updated)
        if entry is not None:
            return entry
    fold = _rebuilt(path, stamp)
    return fold.entry(session_id, size_bytes=stat.st_size, created_at=None, updated_at=updated)


def _rebuilt(path: Path, stamp: Stamp) -> CatalogFold:
    """Fold every record of `path`; write the sidecar when the file did not change while it was read, and is an
    undamaged history (reading a damaged one changes nothing on disk: the next writer repairs it)."""
    batch = read_records(path)
    fold = fold_records((record.message_id, record.message) for record in batch.records)
    with contextlib.suppress(OSError):  # a cache: a folder we cannot write only makes the next read slower
        if not batch.damaged and _stamp(os.stat(path)) == stamp:
            _write_atomically(catalog_path(path), _encode(stamp, fold))
    return fold


def _encode(stamp: Stamp, fold: CatalogFold) -> bytes:
    shown, ledger = fold.dump()
    head = b"%d %d %d %d" % (*stamp, len(shown))
    return b"%08x %s\n%s%s" % (zlib.crc32(ledger, zlib.crc32(shown, zlib.crc32(head))), head, shown, ledger)


def _read_sidecar(path: Path) -> tuple[Stamp, bytes, bytes] | None:
    """(stamp, the fold's two parts) of a sidecar whose checksum holds; `None` when missing, torn or not ours."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    first, _, body = data.partition(b"\n")
    crc, _, head = first.partition(b" ")
    if crc != b"%08x" % zlib.crc32(body, zlib.crc32(head)):
        return None
    try:
        inode, size, mtime, shown = (int(n) for n in head.split(b" "))
    except ValueError:
        return None
    return (inode, size, mtime), body[:shown], body[shown:]


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def _write_in_place(path: Path, data: bytes) -> None:
    """Overwrite the sidecar without a rename (a rename over a file costs a flush on ext4): a reader that catches
    it half-written sees a checksum that does not hold, and folds the records itself."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | _NOFOLLOW, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Pending:
    """An append about to be written: the history's stamp before it, and the first records it brings."""

    before: Stamp
    firsts: list[NewRecord]


class FileCatalogWriter:
    """The catalogue side of a `JsonHistoryStore` writer: `prepare` before writing an append's records, `commit`
    after. It never fails the append: a sidecar it cannot write is rebuilt by the next reader."""

    def __init__(self, history: Path) -> None:
        self._path = catalog_path(history)
        self._fold: CatalogFold | None = None
        self._stamp: Stamp | None = None
        """The stamp of the history `_fold` describes (`None`: no fold held)."""

    def prepare(self, handle: BinaryIO, new: Sequence[NewRecord], known: Container[str]) -> Pending:
        """`known`: the ids recorded before this append (an empty history: a new fold starts)."""
        pending = Pending(_stamp(os.fstat(handle.fileno())), first_versions(new, known))
        if not known:  # no record yet: the catalogue of an empty history, whatever the sidecar says
            self._fold, self._stamp = CatalogFold(), pending.before
        return pending

    def commit(self, pending: Pending, handle: BinaryIO) -> None:
        try:
            fold = self._fold if self._stamp == pending.before else self._stored(pending.before)
            self._fold = self._stamp = None
            if fold is None:
                return  # nothing trustworthy to go on from: the next reader folds the records
            for record in pending.firsts:
                fold.add(record.message)
            after = _stamp(os.fstat(handle.fileno()))
            _write_in_place(self._path, _encode(after, fold))
            self._fold, self._stamp = fold, after
        except (OSError, ValueError, TypeError):
            self._fold = self._stamp = None

    def _stored(self, before: Stamp) -> CatalogFold | None:
        stored = _read_sidecar(self._path)
        return CatalogFold.load(stored[1], stored[2]) if stored is not None and stored[0] == before else None
