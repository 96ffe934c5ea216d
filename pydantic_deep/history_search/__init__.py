"""History search: `search_conversation_history` over the full history, with an incremental FTS5 index."""

from ._index import Hit, IndexDiscardedError, SessionIndex
from ._search import HistoryArchiveSearch, SearchResult
from ._text import QueryError, build_fts_query

__all__ = [
    "HistoryArchiveSearch",
    "Hit",
    "IndexDiscardedError",
    "QueryError",
    "SearchResult",
    "SessionIndex",
    "build_fts_query",
]
