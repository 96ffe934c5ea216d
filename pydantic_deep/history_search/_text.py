"""What the search index stores for a message, and how queries become safe FTS5 expressions: the engine's
(`summarization_pydantic_ai.store`), so every searchable store and this index find the same messages."""

from summarization_pydantic_ai.store import (
    IndexedText,
    SearchQueryError,
    build_fts_query,
    message_text,
    query_terms,
    space_cjk,
)

QueryError = SearchQueryError
"""A query with nothing searchable in it (the message says what to send instead)."""

__all__ = ["IndexedText", "QueryError", "build_fts_query", "message_text", "query_terms", "space_cjk"]
