"""The PostgreSQL schema (versioned, created or migrated on first use) and the statements that need table names.

- `spa_schema`: one row per applied schema version (the migration history).
- `spa_sessions`: one row per session; `head` is the sequence number of its latest record. Appends lock the row
  (`SELECT ... FOR UPDATE`): writers of one session take turns, writers of different sessions never wait.
- `spa_records`: every record ever written (versions included), immutable, in recording order (`seq`); `data` is the
  message's JSON exactly as pydantic-ai encodes it.
- `spa_messages`: the latest version of each message at the place of its first, with its search text and its
  `tsvector` (GIN-indexed). Its wide columns are stored out of line (`toast_tuple_target = 128`): ranking a search
  reads only the narrow rows of the matches. The text is folded in Python (case, diacritics, CJK one token per
  character, every other character a separator) and the `tsvector` built from those words: no extension, no
  dependence on the server's locale, and the same words as the other stores.
- `spa_session_catalog`: what a listing shows of each session (`_catalog`: `shown`, and the `ledger` an append goes
  on from), as of the record `head` (whose `digest` it keeps), written in each append's transaction.

Every table lives in the schema given to the database (default: the connection's `search_path`, usually `public`).
"""

from __future__ import annotations

from typing import Any, LiteralString

from psycopg import AsyncConnection
from psycopg.sql import SQL, Composed, Identifier

from .._protocol import HistoryStoreError

__all__ = ["SCHEMA_VERSION", "Connection", "Tables", "migrate"]

Connection = AsyncConnection[tuple[Any, ...]]

SCHEMA_VERSION = 1
_LOCK_KEY = 0x5350_4148  # pg_advisory_xact_lock: concurrent first users migrate one at a time

_VERSION_1: tuple[LiteralString, ...] = (
    """CREATE TABLE IF NOT EXISTS {sessions} (
        id bigserial PRIMARY KEY,
        name text NOT NULL UNIQUE,
        head bigint NOT NULL DEFAULT 0,
        messages integer NOT NULL DEFAULT 0,
        bytes bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
    )""",
    "CREATE INDEX IF NOT EXISTS {sessions_updated} ON {sessions} (updated_at DESC)",
    """CREATE TABLE IF NOT EXISTS {records} (
        session bigint NOT NULL REFERENCES {sessions} (id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        message_id text NOT NULL,
        position integer NOT NULL,
        digest bytea NOT NULL,
        summary text,
        data bytea NOT NULL,
        PRIMARY KEY (session, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS {messages} (
        session bigint NOT NULL REFERENCES {sessions} (id) ON DELETE CASCADE,
        message_id text NOT NULL,
        position integer NOT NULL,
        seq bigint NOT NULL,
        roles text NOT NULL,
        tool_names text NOT NULL,
        ts text NOT NULL,
        body text NOT NULL,
        extra text,
        extra_tsv tsvector,
        tsv tsvector NOT NULL,
        PRIMARY KEY (session, message_id)
    ) WITH (toast_tuple_target = 128)""",
    "CREATE INDEX IF NOT EXISTS {messages_tsv} ON {messages} USING gin (tsv)",
    "CREATE UNIQUE INDEX IF NOT EXISTS {messages_place} ON {messages} (session, position)",
)

_CATALOG = """CREATE TABLE IF NOT EXISTS {catalog} (
    session bigint PRIMARY KEY REFERENCES {sessions} (id) ON DELETE CASCADE,
    head bigint NOT NULL,
    digest bytea NOT NULL,
    shown bytea NOT NULL,
    ledger bytea NOT NULL
)"""


class Tables:
    """The qualified table names of one database (`schema` or the search path)."""

    def __init__(self, schema: str | None) -> None:
        self.schema = schema
        self._composed: dict[str, Composed] = {}

        def name(table: str) -> Identifier:
            return Identifier(schema, table) if schema else Identifier(table)

        self.names: dict[str, Identifier] = {
            "version": name("spa_schema"),
            "sessions": name("spa_sessions"),
            "records": name("spa_records"),
            "messages": name("spa_messages"),
            "catalog": name("spa_session_catalog"),
            # Index names are never schema-qualified (an index lives in its table's schema).
            "sessions_updated": Identifier("spa_sessions_updated"),
            "messages_tsv": Identifier("spa_messages_tsv"),
            "messages_place": Identifier("spa_messages_place"),
        }

    def sql(self, statement: LiteralString) -> Composed:
        """`statement` with `{sessions}`, `{records}`, ... replaced by the qualified names (composed once per
        statement: an append does not parse its statements again)."""
        composed = self._composed.get(statement)
        if composed is None:
            composed = self._composed[statement] = SQL(statement).format(**self.names)
        return composed


async def migrate(conn: AsyncConnection[tuple[object, ...]], tables: Tables, where: str) -> None:
    """Create the schema, or bring it up to `SCHEMA_VERSION`, in one transaction; refuse a newer one."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        if tables.schema:
            await conn.execute(SQL("CREATE SCHEMA IF NOT EXISTS {}").format(Identifier(tables.schema)))
        await conn.execute(
            tables.sql(
                "CREATE TABLE IF NOT EXISTS {version} "
                "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
        )
        cursor = await conn.execute(tables.sql("SELECT coalesce(max(version), 0) FROM {version}"))
        row = await cursor.fetchone()
        version = int(str(row[0])) if row else 0
        if version > SCHEMA_VERSION:
            raise HistoryStoreError(
                f"{where} was written by a newer version of summarization-pydantic-ai (schema {version}, this one "
                f"knows {SCHEMA_VERSION}); upgrade the package"
            )
        if version < 1:
            for statement in _VERSION_1:
                await conn.execute(tables.sql(statement))
            await conn.execute(tables.sql("INSERT INTO {version} (version) VALUES (1)"))
        # The catalogue needs no new version: a version that does not know it leaves rows behind, which a reader
        # rebuilds. Created only when missing (a role without DDL rights opens a database created by another).
        cursor = await conn.execute(
            "SELECT 1 FROM pg_tables WHERE tablename = 'spa_session_catalog' "
            "AND schemaname = coalesce(%s::name, current_schema())",
            (tables.schema,),
        )
        if await cursor.fetchone() is None:
            await conn.execute(tables.sql(_CATALOG))
