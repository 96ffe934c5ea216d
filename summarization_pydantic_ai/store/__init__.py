"""History stores: the full, uncompressed conversation, keyed by stable message ids.

`JsonHistoryStore` (messages.json) is the default; `open_store(url)` / `open_database(url)` select a store by URL
(`file://`, `sqlite:///`, `postgresql://`), all with the same contract (`HistoryStore`, `SearchableHistoryStore`).
`PostgresHistoryStore` and `PostgresHistoryDatabase` are imported on first use (the `postgres` extra).
"""

from typing import TYPE_CHECKING, Any

from ._catalog import SessionCatalog
from ._catalog_file import read_catalog
from ._copy import CopyReport, copy_sessions
from ._database import (
    HistoryDatabase,
    HistoryStoreConflictError,
    SearchableHistoryStore,
    SearchHit,
    SearchQueryError,
    SessionSummary,
)
from ._file_search import shared_index
from ._fts_index import FileSearchIndex, Hit, IndexDiscardedError, Pending
from ._json_database import JsonHistoryDatabase
from ._json_store import JsonHistoryStore
from ._protocol import (
    HistoryPage,
    HistoryStore,
    HistoryStoreError,
    HistoryStoreLockedError,
    InvalidSessionIdError,
    ensure_message_id,
    new_message_id,
    validate_session_id,
)
from ._reader import RecordBatch, StoredRecord, read_records
from ._report import DamagedRange, StoreReport
from ._search_text import IndexedText, build_fts_query, message_text, query_terms, space_cjk
from ._sqlite import SQLiteHistoryDatabase, SQLiteHistoryStore
from ._url import DEFAULT_SESSION_ID, StoreURLError, file_path, open_database, open_store, redact_url, store_kind
from ._working import working_context

if TYPE_CHECKING:
    from ._postgres import PostgresHistoryDatabase, PostgresHistoryStore

_POSTGRES_NAMES = ("PostgresHistoryDatabase", "PostgresHistoryStore")


def __getattr__(name: str) -> Any:
    """The PostgreSQL stores, imported on first use (they need the `postgres` extra: psycopg 3, psycopg-pool)."""
    if name in _POSTGRES_NAMES:
        try:
            from . import _postgres
        except ImportError as exc:
            raise ImportError(
                f"{name} needs PostgreSQL support: pip install 'summarization-pydantic-ai[postgres]' ({exc})"
            ) from exc
        return getattr(_postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_SESSION_ID",
    "CopyReport",
    "DamagedRange",
    "FileSearchIndex",
    "HistoryDatabase",
    "HistoryPage",
    "HistoryStore",
    "HistoryStoreConflictError",
    "HistoryStoreError",
    "HistoryStoreLockedError",
    "Hit",
    "IndexDiscardedError",
    "IndexedText",
    "InvalidSessionIdError",
    "JsonHistoryDatabase",
    "JsonHistoryStore",
    "Pending",
    "PostgresHistoryDatabase",
    "PostgresHistoryStore",
    "RecordBatch",
    "SQLiteHistoryDatabase",
    "SQLiteHistoryStore",
    "SearchHit",
    "SearchQueryError",
    "SearchableHistoryStore",
    "SessionCatalog",
    "SessionSummary",
    "StoreReport",
    "StoreURLError",
    "StoredRecord",
    "build_fts_query",
    "copy_sessions",
    "ensure_message_id",
    "file_path",
    "message_text",
    "new_message_id",
    "open_database",
    "open_store",
    "query_terms",
    "read_catalog",
    "read_records",
    "redact_url",
    "shared_index",
    "space_cjk",
    "store_kind",
    "validate_session_id",
    "working_context",
]
