"""The SQLite schema (versioned), and how a connection is opened.

- `sessions`: one row per session; `head` is the sequence number of its latest record (optimistic concurrency).
- `records`: every record ever written (versions included), immutable, in recording order (`seq`).
- `messages`: the latest version of each message, at the place (`position`) of its first, with its search text.
- `messages_fts`: FTS5 over each message's text (rowid = `messages.rowid`), in the same file and transaction.
- `session_catalog`: what a listing shows of each session (`_catalog`: `shown`, and the `ledger` an append goes on
  from), as of the record `head` (whose `digest` it keeps), written by each append. Added without a new schema
  version: a version that does not know it leaves the rows behind, and a reader rebuilds those.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .._protocol import HistoryStoreError

__all__ = ["SCHEMA_VERSION", "connect"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    head INTEGER NOT NULL DEFAULT 0,
    messages INTEGER NOT NULL DEFAULT 0,
    bytes INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records(
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    digest BLOB NOT NULL,
    summary TEXT,
    data BLOB NOT NULL,
    PRIMARY KEY(session, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages(
    rowid INTEGER PRIMARY KEY,
    session INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    message_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    roles TEXT NOT NULL,
    tool_names TEXT NOT NULL,
    ts TEXT NOT NULL,
    body TEXT NOT NULL,
    extra TEXT,
    UNIQUE(session, message_id),
    UNIQUE(session, position)
);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(body, tokenize='unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS session_catalog(
    session INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    head INTEGER NOT NULL,
    digest BLOB NOT NULL,
    shown BLOB NOT NULL,
    ledger BLOB NOT NULL
);
"""


def connect(path: Path, *, fsync: bool, busy_timeout: float) -> sqlite3.Connection:
    """A connection to the database at `path` (created with its schema on first use), in WAL mode."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise HistoryStoreError(f"cannot open the SQLite history database {path}: {exc}") from exc
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")  # NORMAL: a killed process loses nothing
        db.execute("PRAGMA foreign_keys=ON")
        _migrate(db, path)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise HistoryStoreError(f"{path} is not a usable SQLite history database: {exc}") from exc
    except BaseException:
        db.close()
        raise
    return db


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA.split(";"):  # one by one: executescript would commit the transaction
            if statement.strip():
                db.execute(statement)
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise HistoryStoreError(
                f"{path} was written by a newer version of summarization-pydantic-ai (schema {version}, this one "
                f"knows {SCHEMA_VERSION}); upgrade the package"
            )
        if version < SCHEMA_VERSION:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
