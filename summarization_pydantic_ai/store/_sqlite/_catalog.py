"""The session catalogue in SQLite: one `session_catalog` row per session (its fold, the head it describes and the
digest of that head's record), written in the append's own transaction; a reader that finds a row not at the
session's head (missing, behind, written by an older version) folds the records again and writes it. Records are
never changed, and a session's row is deleted with it (`ON DELETE CASCADE`): a row at the head describes it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .._catalog import CatalogFold, SessionCatalog, as_bytes, fold_encoded, read_entry
from .._session_index import NewRecord, SessionIndex

__all__ = ["read_catalogs", "write_catalog"]

_UPSERT = (
    "INSERT INTO session_catalog(session, head, digest, shown, ledger) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT(session) DO UPDATE SET head = excluded.head, digest = excluded.digest, shown = excluded.shown, "
    "ledger = excluded.ledger"
)


def write_catalog(
    db: sqlite3.Connection, index: SessionIndex, session: int, after: int, new: Sequence[NewRecord]
) -> None:
    """In the append's transaction, after its records: the catalogue brought from `index.head` to `after`."""
    before = index.head
    fold = index.held_catalog(before)
    if fold is None:
        row = db.execute(
            "SELECT shown, ledger FROM session_catalog WHERE session = ? AND head = ?", (session, before)
        ).fetchone()
        fold = CatalogFold.load(as_bytes(row[0]), as_bytes(row[1])) if row else None
    fold = index.advance_catalog(fold, new)
    if fold is None:
        return  # the row does not describe the session: the next reader folds the records again
    db.execute(_UPSERT, (session, after, new[-1].digest, *fold.dump()))
    index.catalog_written(fold, after)


def read_catalogs(db: sqlite3.Connection, names: Sequence[str] | None) -> list[SessionCatalog]:
    """The catalogue of every session holding a record (or of `names`), most recently updated first; rows that do
    not describe their session's latest record are rebuilt from the records and written again."""
    where = "" if names is None else f" AND s.name IN ({','.join('?' * len(names))})"
    db.execute("BEGIN")  # one snapshot: the rows, and the records of those rebuilt
    try:
        rows = db.execute(
            "SELECT s.id, s.name, s.head, s.bytes, s.created_at, s.updated_at, c.shown, c.head = s.head "
            "FROM sessions s LEFT JOIN session_catalog c ON c.session = s.id "
            f"WHERE s.head > 0{where} ORDER BY s.updated_at DESC, s.name DESC",
            tuple(names or ()),
        ).fetchall()
        entries: list[SessionCatalog] = []
        rebuilt: list[tuple[int, int, bytes, CatalogFold]] = []
        for session, name, head, size, created, updated, shown, fresh in rows:
            times: dict[str, Any] = {
                "size_bytes": int(size),
                "created_at": _time(created),
                "updated_at": _time(updated),
            }
            entry = read_entry(as_bytes(shown), str(name), **times) if fresh and shown else None
            if entry is None:
                fold, digest = _fold(db, int(session), int(head))
                rebuilt.append((int(session), int(head), digest, fold))
                entry = fold.entry(str(name), **times)
            entries.append(entry)
    finally:
        db.execute("COMMIT")
    if rebuilt:
        _store(db, rebuilt)
    return entries


def _fold(db: sqlite3.Connection, session: int, head: int) -> tuple[CatalogFold, bytes]:
    rows = db.execute(
        "SELECT message_id, data, digest FROM records WHERE session = ? AND seq <= ? ORDER BY seq", (session, head)
    ).fetchall()
    return fold_encoded([(str(r[0]), bytes(r[1])) for r in rows]), bytes(rows[-1][2])


def _store(db: sqlite3.Connection, rebuilt: list[tuple[int, int, bytes, CatalogFold]]) -> None:
    """Write the rebuilt rows, each only while its session still ends with the record it was folded up to at
    least (never over a row a writer brought further, never onto a session deleted and made again)."""
    try:
        db.execute("BEGIN IMMEDIATE")
        for session, head, digest, fold in rebuilt:
            db.execute(
                "INSERT INTO session_catalog(session, head, digest, shown, ledger) SELECT ?, ?, ?, ?, ? WHERE EXISTS "
                "(SELECT 1 FROM records WHERE session = ? AND seq = ? AND digest = ?) ON CONFLICT(session) DO UPDATE "
                "SET head = excluded.head, digest = excluded.digest, shown = excluded.shown, ledger = excluded.ledger "
                "WHERE session_catalog.head <= excluded.head",
                (session, head, digest, *fold.dump(), session, head, digest),
            )
        db.execute("COMMIT")
    except sqlite3.OperationalError:  # read-only, or busy for longer than the timeout: the next reader writes it
        if db.in_transaction:
            db.execute("ROLLBACK")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None
