"""The session catalogue in PostgreSQL: one `spa_session_catalog` row per session (its fold, the head it describes
and the digest of that head's record), written in the append's own transaction; a reader that finds a row not at
the session's head (missing, behind, written by an older version) folds the records again and writes it. Records
are never changed, and a session's row is deleted with it (`ON DELETE CASCADE`): a row at the head describes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._catalog import CatalogFold, SessionCatalog, as_bytes, fold_encoded, read_entry
from .._session_index import NewRecord, SessionIndex
from ._schema import Connection, Tables

__all__ = ["catalog_before", "read_catalogs"]


async def catalog_before(
    conn: Connection, tables: Tables, index: SessionIndex, new: Sequence[NewRecord]
) -> CatalogFold | None:
    """The catalogue an append writes in its statement: the one this store holds at its session's head (read once
    from the row when it holds none), with the append's first records added; `None` when no row describes the
    session at that head (the next reader folds the records again)."""
    fold = index.held_catalog(index.head)
    if fold is None:
        cursor = await conn.execute(
            tables.sql("SELECT shown, ledger FROM {catalog} WHERE session = %s AND head = %s"),
            (index.session, index.head),
        )
        row = await cursor.fetchone()
        fold = CatalogFold.load(as_bytes(row[0]), as_bytes(row[1])) if row else None
    return index.advance_catalog(fold, new)


async def read_catalogs(conn: Connection, tables: Tables, names: Sequence[str] | None) -> list[SessionCatalog]:
    """The catalogue of every session holding a record (or of `names`), most recently updated first; rows that do
    not describe their session's latest record are rebuilt from the records and written again."""
    # One statement, no transaction: the records up to a head never change, so a row rebuilt later from the records
    # up to the head it was read at is exact.
    cursor = await conn.execute(
        tables.sql(
            "SELECT s.id, s.name, s.head, s.bytes, s.created_at, s.updated_at, c.shown, "
            "coalesce(c.head = s.head, false) FROM {sessions} s LEFT JOIN {catalog} c ON c.session = s.id "
            "WHERE s.head > 0 AND (%s::text[] IS NULL OR s.name = ANY(%s::text[])) "
            "ORDER BY s.updated_at DESC, s.name"
        ),
        (names, names),
    )
    rebuilt: list[tuple[int, int, bytes, CatalogFold]] = []
    entries: list[SessionCatalog] = []
    for session, name, head, size, created, updated, shown, fresh in await cursor.fetchall():
        times: dict[str, Any] = {"size_bytes": int(size), "created_at": created, "updated_at": updated}
        entry = read_entry(as_bytes(shown), str(name), **times) if fresh and shown else None
        if entry is None:
            fold, digest = await _fold(conn, tables, int(session), int(head))
            rebuilt.append((int(session), int(head), digest, fold))
            entry = fold.entry(str(name), **times)
        entries.append(entry)
    for session, head, digest, fold in rebuilt:
        await _store(conn, tables, session, head, digest, fold)
    return entries


async def _fold(conn: Connection, tables: Tables, session: int, head: int) -> tuple[CatalogFold, bytes]:
    cursor = await conn.execute(
        tables.sql("SELECT message_id, data, digest FROM {records} WHERE session = %s AND seq <= %s ORDER BY seq"),
        (session, head),
    )
    rows = await cursor.fetchall()
    return fold_encoded([(str(r[0]), bytes(r[1])) for r in rows]), bytes(rows[-1][2])


async def _store(conn: Connection, tables: Tables, session: int, head: int, digest: bytes, fold: CatalogFold) -> None:
    """Write a rebuilt row while its session still ends with the record it was folded up to at least (never over a
    row a writer brought further)."""
    await conn.execute(
        tables.sql(
            "INSERT INTO {catalog} AS c (session, head, digest, shown, ledger) SELECT %s, %s, %s, %s, %s "
            "WHERE EXISTS (SELECT 1 FROM {records} WHERE session = %s AND seq = %s AND digest = %s) "
            "ON CONFLICT (session) DO UPDATE SET head = excluded.head, digest = excluded.digest, "
            "shown = excluded.shown, ledger = excluded.ledger WHERE c.head <= excluded.head"
        ),
        (session, head, digest, *fold.dump(), session, head, digest),
    )
