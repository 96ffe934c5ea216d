"""What an append writes to PostgreSQL, and how: the rows of its records, in one transaction.

A store that wrote or read its session last (the usual case: one worker per conversation at a time) sends the
whole transaction in one pipeline, one round trip: it moves the session's head from the value it knows (a statement
that fails when another writer moved it), then inserts the records and the searchable latest versions. When the
head moved meanwhile, the transaction fails, writes nothing, and the store takes the careful path: lock the
session's row, read what the other writer appended, and decide (skip what is recorded already, or raise
`HistoryStoreConflictError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._catalog import CatalogFold
from .._framing import Record
from .._search_text import message_text
from .._session_index import NewRecord, SessionIndex, load_summary
from ._schema import Tables
from ._search import tsvector_literal

__all__ = ["Rows", "rows_of", "searchable_row", "write_rows"]

_APPEND = (
    "WITH moved AS (UPDATE {sessions} SET head = %(head)s, messages = %(places)s, bytes = bytes + %(size)s, "
    "updated_at = now() WHERE id = %(session)s AND head = %(expected)s RETURNING 1), "
    "recorded AS (INSERT INTO {records} (session, seq, message_id, position, digest, summary, data) "
    "SELECT %(session)s, * FROM unnest(%(seq)s::bigint[], %(ids)s::text[], %(positions)s::integer[], "
    "%(digests)s::bytea[], %(summaries)s::text[], %(data)s::bytea[])), "
    "searchable AS (INSERT INTO {messages} AS m (session, seq, position, message_id, roles, tool_names, ts, body, tsv) "
    "SELECT %(session)s, seq, position, message_id, roles, tool_names, ts, body, tsv::tsvector FROM unnest("
    "%(latest_seq)s::bigint[], %(latest_positions)s::integer[], %(latest_ids)s::text[], %(roles)s::text[], "
    "%(tools)s::text[], %(ts)s::text[], %(bodies)s::text[], %(tsv)s::text[]) "
    "AS t(seq, position, message_id, roles, tool_names, ts, body, tsv) "
    "ON CONFLICT (session, message_id) DO UPDATE SET seq = excluded.seq, roles = excluded.roles, "
    "tool_names = excluded.tool_names, ts = excluded.ts, body = excluded.body, "
    "tsv = CASE WHEN m.extra_tsv IS NULL THEN excluded.tsv ELSE excluded.tsv || m.extra_tsv END), "
    "catalogued AS (INSERT INTO {catalog} (session, head, digest, shown, ledger) "
    "SELECT %(session)s, %(head)s, %(last_digest)s, %(shown)s, %(ledger)s WHERE %(catalogued)s "
    "ON CONFLICT (session) DO UPDATE SET head = excluded.head, digest = excluded.digest, shown = excluded.shown, "
    "ledger = excluded.ledger) "
    "SELECT 1 / count(*) FROM moved"
)
"""One statement, so one round trip and its own transaction: move the session's head from the expected value
(the row's lock: writers of one session take turns), insert the records (every version), upsert the latest
version of each message, searchable (text added with add_search_text stays with it), and the session's catalogue
(`_catalog`) when the store has one to bring up to the new head. When another writer moved the head the statement
fails (division by zero, or the records' key taken) and writes nothing."""


def clean(text: str) -> str:
    return text.replace("\x00", "\ufffd")  # PostgreSQL text holds no NUL (the record's JSON keeps it, escaped)


def searchable_row(message: Any) -> tuple[str, str, str, str, str, str]:
    """(message id, roles, tool names, timestamp, body, body as a tsvector literal) of a message with an id."""
    text = message_text(message)
    assert text is not None  # every recorded message has an id
    body = clean(text.body)
    return (text.message_id, text.roles, clean(text.tool_names), clean(text.timestamp), body, tsvector_literal(body))


@dataclass
class Rows:
    """The rows of one append, and what the store's index learns once they are committed."""

    session: int
    expected: int
    """The head the append starts from."""
    head: int = 0
    places: int = 0
    size: int = 0
    records: list[tuple[Any, ...]] = field(default_factory=list[tuple[Any, ...]])
    """(seq, message id, position, digest, summary, data) of each record."""
    latest: dict[str, tuple[Any, ...]] = field(default_factory=dict[str, tuple[Any, ...]])
    """Per message, (seq, position, message id, roles, tool names, timestamp, body, tsvector) of its last record."""
    written: list[tuple[Record, int, bytes]] = field(default_factory=list[tuple[Record, int, bytes]])
    catalog: CatalogFold | None = None
    """The session's catalogue at the new head (`None`: the append leaves the catalogue row as it is)."""

    def parameters(self) -> dict[str, Any]:
        """The statement's parameters: each column of the rows as an array."""
        shown, ledger = self.catalog.dump() if self.catalog is not None else (b"", b"")
        return {
            "catalogued": self.catalog is not None,
            "last_digest": self.records[-1][3],
            "shown": shown,
            "ledger": ledger,
            "head": self.head,
            "places": self.places,
            "size": self.size,
            "session": self.session,
            "expected": self.expected,
            **_columns(("seq", "ids", "positions", "digests", "summaries", "data"), self.records),
            **_columns(
                ("latest_seq", "latest_positions", "latest_ids", "roles", "tools", "ts", "bodies", "tsv"),
                list(self.latest.values()),
            ),
        }

    def commit_to(self, index: SessionIndex) -> None:
        """Index what was written (after the commit)."""
        for record, position, digest in self.written:
            index.place(record, position, digest)
        index.head = self.head
        if self.catalog is not None:
            index.catalog_written(self.catalog, self.head)


def _columns(names: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> dict[str, list[Any]]:
    return {name: [row[i] for row in rows] for i, name in enumerate(names)}


def rows_of(index: SessionIndex, new: list[NewRecord]) -> Rows:
    """The rows of `new` after the index's head: each record a new sequence number, a new message the next place,
    a newer version the place of its first."""
    assert index.session is not None
    rows = Rows(index.session, index.head, index.head, len(index.slots))
    pending: dict[str, int] = {}
    for item in new:
        rows.head += 1
        position = index.positions.get(item.message_id, pending.get(item.message_id))
        if position is None:
            position = pending[item.message_id] = rows.places
            rows.places += 1
        rows.records.append((rows.head, item.message_id, position, item.digest, item.summary, item.data))
        rows.latest[item.message_id] = (rows.head, position, *searchable_row(item.message))
        rows.written.append(
            (Record(rows.head, 0, item.message_id, load_summary(item.summary), 0), position, item.digest)
        )
        rows.size += len(item.data)
    return rows


async def write_rows(conn: Any, tables: Tables, rows: Rows) -> None:
    """Run the append's one statement (in the caller's transaction, or as its own)."""
    await conn.execute(tables.sql(_APPEND), rows.parameters())
