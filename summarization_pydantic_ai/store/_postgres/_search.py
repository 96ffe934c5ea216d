"""Full-text search in PostgreSQL: `tsvector`/`tsquery` built in Python from the same folded words as every other
store (so a search finds the same messages whatever the server's locale), GIN-indexed, ranked by how many of the
query's terms a message holds, then by `ts_rank`, ties in recorded order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from .._database import SearchHit, SearchQueryError
from .._scan_search import normalized_words, parse_query
from ._schema import Tables

__all__ = ["search_rows", "tsvector_literal"]

_MAX_LEXEME_BYTES = 2046  # PostgreSQL refuses longer lexemes (2047 bytes with the terminator)
_MAX_POSITION = 16383  # positions above are stored as 16383
_MAX_POSITIONS = 256  # per lexeme
_MAX_VECTOR_BYTES = 900_000  # under the 1 MB limit of a tsvector: a huge message is indexed up to there


def _quote(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(text: str) -> str:
    """`text` as a `tsvector` literal: its folded words (`normalized_words`) with their positions."""
    positions: dict[str, list[int]] = {}
    size = 0
    for index, word in enumerate(normalized_words(text), start=1):
        seen = positions.get(word)
        if seen is None:
            length = len(word.encode("utf-8"))
            if length > _MAX_LEXEME_BYTES or size + length > _MAX_VECTOR_BYTES:
                continue
            size += length + 8
            seen = positions[word] = []
        position = min(index, _MAX_POSITION)
        if len(seen) < _MAX_POSITIONS and (not seen or seen[-1] != position):
            seen.append(position)
            size += 2
    return " ".join(f"{_quote(word)}:{','.join(map(str, spots))}" for word, spots in positions.items())


def term_queries(query: str) -> list[str]:
    """One `tsquery` literal per query term: a phrase of its words (`<->`), the last one a prefix for `word*`."""
    queries: list[str] = []
    for words, prefix in parse_query(query):
        kept = [w for w in words if len(w.encode("utf-8")) <= _MAX_LEXEME_BYTES]
        if kept:
            quoted = [_quote(w) for w in kept]
            if prefix:
                quoted[-1] += ":*"
            queries.append(" <-> ".join(quoted))
    if not queries:
        raise SearchQueryError(
            "the query has no searchable words; search for words or identifiers that appeared in the conversation"
        )
    return queries


async def search_rows(
    conn: AsyncConnection[tuple[Any, ...]],
    tables: Tables,
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
    """The best `limit` hits after `offset`: each message scores the sum, over the query terms it holds, of the
    term's rarity (`ln(1 + messages / messages with the term)`), ties in recorded order.

    Each term is one GIN index scan returning only (session, position): no message text or `tsvector` is read to
    rank (the wide columns live out of line, `toast_tuple_target`), only the bodies of the hits returned."""
    if limit <= 0 or offset < 0:
        raise SearchQueryError(f"limit must be > 0 and offset >= 0, got limit={limit}, offset={offset}")
    terms = term_queries(query)
    if session_names is not None and not session_names:
        return []
    where: list[str] = []
    params: dict[str, Any] = {f"t{i}": term for i, term in enumerate(terms)}
    params.update(limit=limit, offset=offset)
    if session_names is not None:
        where.append("m.session = ANY(SELECT id FROM {sessions} WHERE name = ANY(%(sessions)s))")
        params["sessions"] = list(session_names)
    if roles:
        where.append("EXISTS (SELECT 1 FROM unnest(%(roles)s::text[]) r WHERE strpos(' ' || m.roles || ' ', r) > 0)")
        params["roles"] = [f" {role} " for role in roles]
    if tool_name:
        where.append("strpos(' ' || m.tool_names || ' ', %(tool)s) > 0")
        params["tool"] = f" {tool_name} "
    if since:
        where.append("m.ts >= %(since)s")
        params["since"] = since
    if until:
        where.append("m.ts <= %(until)s")
        params["until"] = until
    async with conn.transaction():
        # A word found in most messages makes a sequential scan look cheaper to the planner, but it would read
        # every message's tsvector; the GIN index answers plain words and prefixes exactly, from narrow rows.
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL jit = off")  # compiling costs more than these queries take
        cursor = await conn.execute(tables.sql(_statement(len(terms), where)), params)  # pyright: ignore[reportArgumentType]
        rows = await cursor.fetchall()
    return [
        SearchHit(
            str(r[0]),
            str(r[1]),
            int(r[2]),
            str(r[3]),
            str(r[4]),
            str(r[5]),
            str(r[6]) + (f"\n{r[7]}" if r[7] else ""),
            float(r[8]),
        )
        for r in rows
    ]


def _statement(terms: int, where: list[str]) -> str:
    """One CTE per term (its matches), weighted by rarity, summed per message; the page joined to the text."""
    filters = "".join(f" AND {w}" for w in where)
    matches = [
        f"t{i} AS MATERIALIZED (SELECT m.session, m.position FROM {{messages}} m "
        f"WHERE m.tsv @@ %(t{i})s::tsquery{filters})"
        for i in range(terms)
    ]
    weighted = " UNION ALL ".join(
        f"SELECT session, position, ln(1 + n.total / (SELECT count(*) FROM t{i})) AS w FROM t{i}, n"
        for i in range(terms)
    )
    return (
        "WITH n AS (SELECT greatest(sum(messages), 1)::float8 AS total FROM {sessions}), "
        + ", ".join(matches)
        + f", scored AS ({_scored(terms, weighted)}), "
        "page AS (SELECT sc.session, sc.position, sc.score, s.name FROM scored sc "
        "JOIN {sessions} s ON s.id = sc.session "
        "ORDER BY sc.score DESC, s.name, sc.position LIMIT %(limit)s OFFSET %(offset)s) "
        "SELECT p.name, m.message_id, m.position, m.roles, m.tool_names, m.ts, m.body, m.extra, p.score "
        "FROM page p JOIN {messages} m ON m.session = p.session AND m.position = p.position "
        "ORDER BY p.score DESC, p.name, p.position"
    )


def _scored(terms: int, weighted: str) -> str:
    """One term: its matches are the scores (one row per message already); more: summed per message."""
    if terms == 1:
        return f"SELECT session, position, w AS score FROM ({weighted}) x"
    return f"SELECT session, position, sum(w) AS score FROM ({weighted}) x GROUP BY session, position"
