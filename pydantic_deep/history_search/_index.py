"""The search index of one `messages.json`: SQLite FTS5 with BM25, updated from the bytes appended since last time.

The index (`messages.json.index.sqlite`, beside the history) is derived data: it remembers how far into the file it
has read and the id of the file's first record. A file that shrank or starts differently (recovered, replaced) is
re-indexed from scratch; a missing or unreadable index is rebuilt. Appends cost O(new records).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ToolReturnPart

from summarization_pydantic_ai import get_message_id

from ..eviction import EVICTION_METADATA_KEY
from ._text import IndexedText, message_text, space_cjk

__all__ = ["Hit", "SessionIndex", "evicted_paths"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs(
    rowid INTEGER PRIMARY KEY, message_id TEXT NOT NULL, position INTEGER NOT NULL, roles TEXT NOT NULL,
    tool_names TEXT NOT NULL, ts TEXT NOT NULL, body TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(body, tokenize='unicode61 remove_diacritics 2');
"""
_VERSION = "1"


@dataclass(frozen=True)
class Hit:
    message_id: str
    position: int
    roles: str
    tool_names: str
    timestamp: str
    body: str
    score: float
    session: str = ""


def evicted_paths(message: ModelMessage) -> list[str]:
    """Paths of tool outputs this message evicted (their full text is indexed with the message)."""
    paths: list[str] = []
    for part in message.parts:
        metadata: Any = part.metadata if isinstance(part, ToolReturnPart) else None
        info: Any = cast(dict[str, Any], metadata).get(EVICTION_METADATA_KEY) if isinstance(metadata, dict) else None
        if isinstance(info, dict) and isinstance(path := cast(dict[str, Any], info).get("path"), str):
            paths.append(path)
    return paths


@dataclass(frozen=True)
class NewRecord:
    position: int
    message: ModelMessage


class SessionIndex:
    """Full-text index of one history file."""

    def __init__(self, messages_path: str | Path, *, index_path: str | Path | None = None) -> None:
        self.messages_path = Path(messages_path)
        self.index_path = (
            Path(index_path) if index_path else self.messages_path.with_name(self.messages_path.name + ".index.sqlite")
        )
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._first_line: tuple[bytes, str | None] | None = None
        """The file's first record as last parsed, and its id."""

    # -- connection ----------------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        self.index_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = self._open()
        except sqlite3.DatabaseError:  # a corrupt index is derived data: start over
            self.index_path.unlink(missing_ok=True)
            db = self._open()
        self._db = db
        return db

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.index_path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=OFF")  # the index can always be rebuilt from messages.json
        db.executescript(_SCHEMA)
        if self._meta(db, "version") != _VERSION:
            self._reset(db)
        return db

    @staticmethod
    def _meta(db: sqlite3.Connection, key: str) -> str | None:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    @staticmethod
    def _reset(db: sqlite3.Connection) -> None:
        db.execute("BEGIN")
        db.execute("DELETE FROM docs")
        db.execute("DELETE FROM docs_fts")
        db.execute("DELETE FROM meta")
        db.executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?)",
            [("version", _VERSION), ("offset", "0"), ("records", "0"), ("first_id", "")],
        )
        db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- reading the history file --------------------------------------------------------------------------------

    def read_new(self) -> tuple[list[NewRecord], int]:
        """Records appended since the last update (all of them after a reset), and the file offset after them.
        Sync: run it in a thread."""
        with self._lock:
            db = self._connect()
            try:
                data_size = self.messages_path.stat().st_size
            except FileNotFoundError:
                return [], 0
            offset = int(self._meta(db, "offset") or 0)
            first_id = self._meta(db, "first_id") or ""
            if offset > data_size or (first_id and self._first_id() != first_id):
                self._reset(db)
                offset = 0
            with self.messages_path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read()
            return self._parse(data, offset, int(self._meta(db, "records") or 0))

    def _first_id(self) -> str | None:
        with self.messages_path.open("rb") as handle:
            handle.readline()
            line = handle.readline().rstrip(b"\n").rstrip(b",")
        if self._first_line is not None and self._first_line[0] == line:
            return self._first_line[1]  # the same bytes: the same record (checked on every update)
        try:
            first_id = get_message_id(ModelMessagesTypeAdapter.validate_json(b"[" + line + b"]")[0])
        except ValueError:
            return None
        self._first_line = (line, first_id)
        return first_id

    @staticmethod
    def _parse(data: bytes, offset: int, records: int) -> tuple[list[NewRecord], int]:
        """Complete records in `data` (read from `offset`), and the offset just after the last one."""
        new: list[NewRecord] = []
        end = offset
        position = 0
        if offset == 0:
            if not data.startswith(b"[\n"):
                return [], 0
            position = 2
        while True:
            newline = data.find(b"\n", position)
            if newline < 0:
                break  # an incomplete line: an append in progress, read next time
            line = data[position:newline]
            start = position
            position = newline + 1
            raw = line.lstrip(b",").rstrip(b",")
            if not raw or raw == b"]":
                continue
            try:
                message = ModelMessagesTypeAdapter.validate_json(b"[" + raw + b"]")[0]
            except ValueError:
                break  # a torn record: stop before it
            new.append(NewRecord(records + len(new), message))
            end = offset + start + len(line) - (1 if line.endswith(b",") else 0)
        return new, end

    # -- writing the index ---------------------------------------------------------------------------------------

    def insert(self, records: Sequence[NewRecord], extras: dict[str, str], end_offset: int) -> int:
        """Index `records` (with evicted output text by message id in `extras`) and advance the offset."""
        with self._lock:
            db = self._connect()
            rows: list[tuple[IndexedText, int]] = []
            for record in records:
                text = message_text(record.message, extras.get(get_message_id(record.message) or "", ""))
                if text is not None:
                    rows.append((text, record.position))
            db.execute("BEGIN")
            for text, position in rows:
                cursor = db.execute(
                    "INSERT INTO docs(message_id, position, roles, tool_names, ts, body) VALUES (?, ?, ?, ?, ?, ?)",
                    (text.message_id, position, text.roles, text.tool_names, text.timestamp, text.body),
                )
                db.execute("INSERT INTO docs_fts(rowid, body) VALUES (?, ?)", (cursor.lastrowid, space_cjk(text.body)))
            total = int(self._meta(db, "records") or 0) + len(records)
            updates = [("offset", str(end_offset)), ("records", str(total))]
            if records and not self._meta(db, "first_id") and records[0].position == 0:
                updates.append(("first_id", get_message_id(records[0].message) or ""))
            db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", updates)
            db.execute("COMMIT")
            return len(rows)

    # -- querying --------------------------------------------------------------------------------------------------

    def search(
        self,
        fts_query: str,
        *,
        roles: Sequence[str] = (),
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[Hit]:
        where = ["docs_fts MATCH ?"]
        params: list[Any] = [fts_query]
        if roles:
            where.append("(" + " OR ".join("(' ' || d.roles || ' ') LIKE ?" for _ in roles) + ")")
            params += [f"% {role} %" for role in roles]
        if tool_name:
            where.append("(' ' || d.tool_names || ' ') LIKE ?")
            params.append(f"% {tool_name} %")
        if since:
            where.append("d.ts >= ?")
            params.append(since)
        if until:
            where.append("d.ts <= ?")
            params.append(until)
        # Rank first, fetch the page's rows after: sorting whole rows would copy the body of every match into
        # the sorter (a common word matches most messages). Filters need the docs row but not its body. Equal
        # scores go in message order, so pages never overlap.
        ranked = (
            "SELECT docs_fts.rowid AS rowid, bm25(docs_fts) AS score FROM docs_fts "
            + ("JOIN docs d ON d.rowid = docs_fts.rowid " if len(where) > 1 else "")
            + "WHERE "
            + " AND ".join(where)
            + " ORDER BY score, rowid LIMIT ? OFFSET ?"
        )
        sql = (
            "SELECT d.message_id, d.position, d.roles, d.tool_names, d.ts, d.body, r.score "
            f"FROM ({ranked}) r JOIN docs d ON d.rowid = r.rowid ORDER BY r.score, r.rowid"
        )
        params += [limit, offset]
        with self._lock:
            rows = self._connect().execute(sql, params).fetchall()
        return [Hit(str(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), float(r[6])) for r in rows]

    def indexed_records(self) -> int:
        with self._lock:
            return int(self._meta(self._connect(), "records") or 0)
