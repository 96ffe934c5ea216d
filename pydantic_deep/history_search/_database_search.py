"""History search over a `HistoryDatabase` (SQLite, PostgreSQL): the database searches itself, no index file."""

from __future__ import annotations

from typing import Any

from pydantic_ai import RunContext

from summarization_pydantic_ai.store import (
    HistoryDatabase,
    HistoryStore,
    HistoryStoreError,
    SearchableHistoryStore,
    SearchHit,
)

from ._index import Hit

__all__ = ["current_store", "search_database"]


def current_store(database: HistoryDatabase, ctx: RunContext[Any] | None) -> SearchableHistoryStore:
    """The run's session in `database` (`ctx.deps.session_id`)."""
    session_id = getattr(ctx.deps, "session_id", None) if ctx is not None else None
    if not isinstance(session_id, str):
        raise HistoryStoreError("this run has no session id (use DeepAgentDeps) to search its history")
    return database.session(session_id)


def as_hit(hit: SearchHit, label: str) -> Hit:
    # `Hit.score` sorts ascending (BM25's convention); a `SearchHit`'s higher score is better.
    return Hit(hit.message_id, hit.position, hit.roles, hit.tool_names, hit.timestamp, hit.body, -hit.score, label)


async def search_database(
    database: HistoryDatabase | None,
    store: HistoryStore | None,
    ctx: RunContext[Any] | None,
    query: str,
    *,
    session: str | None,
    filters: dict[str, Any],
    limit: int,
) -> list[Hit]:
    """Hits of the current session (`store`, or the run's session of `database`), of one session, or of all
    (`session="all"`), best first."""
    if session:
        if database is None:
            raise HistoryStoreError("this search has no database: leave session out to search the current session")
        ids = None if session == "all" else [session]
        found = await database.search(query, session_ids=ids, limit=limit, **filters)
        return [as_hit(h, h.session_id) for h in found]
    current = store if isinstance(store, SearchableHistoryStore) else None
    if current is None and database is not None:
        current = current_store(database, ctx)
    if current is None:
        raise HistoryStoreError("this store cannot be searched: use a SearchableHistoryStore")
    return [as_hit(h, "") for h in await current.search(query, limit=limit, **filters)]
