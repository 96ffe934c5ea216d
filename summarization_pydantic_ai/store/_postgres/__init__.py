"""PostgreSQL history stores (the `postgres` extra: psycopg 3 and psycopg-pool), imported only when used."""

from ._db import PostgresHistoryDatabase, PostgresHistoryStore, open_postgres_database
from ._schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "PostgresHistoryDatabase", "PostgresHistoryStore", "open_postgres_database"]
