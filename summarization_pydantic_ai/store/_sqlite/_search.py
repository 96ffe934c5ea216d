"""FTS5 search over the messages of one or more sessions (BM25, best first, ties in recorded order)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from .._database import SearchHit, SearchQueryError
from .._search_text import build_fts_query, message_filters, space_cjk

__all__ = ["fts_text", "search_rows"]


def fts_text(body: str, extra: str | None) -> str:
    """What the FTS index holds for a message: its text and any added text, CJK spaced."""
    return space_cjk(body + (f"\n{extra}" if extra else ""))


def search_rows(
    db: sqlite3.Connection,
    query: str,
    session_names: Sequence[str] | None,
    *,
    roles: Sequence[str],
    tool_name: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    offset: int,
) -> list[SearchHit]:
    if limit <= 0 or offset < 0:
        raise SearchQueryError(f"limit must be > 0 and offset >= 0, got limit={limit}, offset={offset}")
    where = ["messages_fts MATCH ?"]
    params: list[Any] = [build_fts_query(query)]
    if session_names is not None:
        if not session_names:
            return []
        where.append(f"s.name IN ({','.join('?' * len(session_names))})")
        params += list(session_names)
    conditions, values = message_filters("m", roles, tool_name, since, until)
    where += conditions
    params += values
    sql = (
        "SELECT s.name, m.message_id, m.position, m.roles, m.tool_names, m.ts, m.body, m.extra, "
        "bm25(messages_fts) AS score FROM messages_fts "
        "JOIN messages m ON m.rowid = messages_fts.rowid JOIN sessions s ON s.id = m.session "
        "WHERE " + " AND ".join(where) + " ORDER BY score, s.name, m.position LIMIT ? OFFSET ?"
    )
    rows = db.execute(sql, [*params, limit, offset]).fetchall()
    return [
        SearchHit(
            str(r[0]),
            str(r[1]),
            int(r[2]),
            str(r[3]),
            str(r[4]),
            str(r[5]),
            str(r[6]) + (f"\n{r[7]}" if r[7] else ""),
            -float(r[8]),  # bm25: lower is better
        )
        for r in rows
    ]
