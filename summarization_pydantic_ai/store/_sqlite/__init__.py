"""The SQLite history store: many sessions in one file (WAL), FTS5 search in the same file."""

from ._db import SQLiteHistoryDatabase, SQLiteHistoryStore
from ._schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "SQLiteHistoryDatabase", "SQLiteHistoryStore"]
