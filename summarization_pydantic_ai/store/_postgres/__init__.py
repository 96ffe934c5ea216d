"""PostgreSQL history stores (the `postgres` extra: psycopg 3 and psycopg-pool), imported only when used."""

from ._db import PostgresHistoryDatabase, open_postgres_database
from ._schema import SCHEMA_VERSION
from ._store import PostgresHistoryStore

__all__ = ["SCHEMA_VERSION", "PostgresHistoryDatabase", "PostgresHistoryStore", "open_postgres_database"]
