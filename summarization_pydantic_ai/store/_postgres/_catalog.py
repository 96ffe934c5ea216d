"""The session catalogue in PostgreSQL: one `spa_catalog` row per session (its fold, the head it describes and the
digest of that head's record), written in the append's own transaction; a reader that finds a row not describing
the session's latest record (missing, behind, written by an older version) folds the records again and writes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._catalog import CatalogFold, SessionCatalog, as_bytes, fold_encoded, read_entry
from .._session_index import NewRecord, SessionIndex
from ._schema import Connection, Tables

__all__ = ["read_catalogs", "write_catalog"]


async def write_catalog(
    conn: Connection, tables: Tables, index: SessionIndex, after: int, new: Sequence[NewRecord]
) -> None:
    """In the append's transaction, after its records: the catalogue brought from `index.head` to `after` (one
    statement when this store wrote the previous append of the session)."""
    before, session = index.head, index.session
    fold = index.held_catalog(before)
    if fold is None:
        cursor = await conn.execute(
            tables.sql(
                "SELECT c.data FROM {catalog} c JOIN {records} r ON r.session = c.session AND r.seq = c.head "
                "WHERE c.session = %s AND c.head = %s AND c.digest = r.digest"
            ),
            (session, before),
        )
        row = await cursor.fetchone()
        fold = CatalogFold.load(as_bytes(row[0])) if row else None
    fold = index.advance_catalog(fold, new)
    if fold is None:
        return  # the row does not describe the session: the next reader folds the records again
    await conn.execute(
        tables.sql(
            "INSERT INTO {catalog} (session, head, digest, data) VALUES (%s, %s, %s, %s) ON CONFLICT (session) "
            "DO UPDATE SET head = excluded.head, digest = excluded.digest, data = excluded.data"
        ),
        (session, after, new[-1].digest, fold.dump()),
    )
    index.catalog_written(fold, after)


async def read_catalogs(conn: Connection, tables: Tables, names: Sequence[str] | None) -> list[SessionCatalog]:
    """The catalogue of every session holding a record (or of `names`), most recently updated first; rows that do
    not describe their session's latest record are rebuilt from the records and written again."""
    rebuilt: list[tuple[int, int, bytes, CatalogFold]] = []
    entries: list[SessionCatalog] = []
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursor = await conn.execute(
            tables.sql(
                "SELECT s.id, s.name, s.head, s.bytes, s.created_at, s.updated_at, c.data, "
                "coalesce(c.head = s.head AND c.digest = r.digest, false) FROM {sessions} s "
                "LEFT JOIN {catalog} c ON c.session = s.id "
                "LEFT JOIN {records} r ON r.session = s.id AND r.seq = s.head "
                "WHERE s.head > 0 AND (%s::text[] IS NULL OR s.name = ANY(%s::text[])) "
                "ORDER BY s.updated_at DESC, s.name"
            ),
            (names, names),
        )
        for session, name, head, size, created, updated, data, fresh in await cursor.fetchall():
            times: dict[str, Any] = {"size_bytes": int(size), "created_at": created, "updated_at": updated}
            entry = read_entry(as_bytes(data), str(name), **times) if fresh and data else None
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
            "INSERT INTO {catalog} AS c (session, head, digest, data) SELECT %s, %s, %s, %s WHERE EXISTS (SELECT 1 "
            "FROM {records} WHERE session = %s AND seq = %s AND digest = %s) ON CONFLICT (session) DO UPDATE SET "
            "head = excluded.head, digest = excluded.digest, data = excluded.data WHERE c.head <= excluded.head"
        ),
        (session, head, digest, fold.dump(), session, head, digest),
    )
