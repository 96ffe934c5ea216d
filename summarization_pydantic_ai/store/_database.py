"""Many sessions in one database: the `HistoryDatabase` protocol, and the searchable store each session gets.

A `HistoryDatabase` (SQLite file, PostgreSQL server, or a folder of messages.json files) holds the histories of
many sessions. `session(session_id)` returns that session's `SearchableHistoryStore`: a `HistoryStore` (same
contract as `JsonHistoryStore`: every message once, in order, versions of edited messages, compaction lineage,
rehydration by id) that can also be searched. Stores of one database in one process share what they hold (one
instance per session id).

Concurrency between processes is optimistic, per session: a store remembers the last record of its session it
has seen (after `load`, `load_all`, `read` or its own `append`). When another writer appended to the session since,
an `append` that has new messages to record raises `HistoryStoreConflictError` and writes nothing: the loser
reloads (`await store.load()`) and retries its turn on top of the winner's. Messages already recorded (same id,
same content) are skipped as always, so a retried append never duplicates one. A store that has not read its
session yet has no expectation and never conflicts on its first append.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic_ai.messages import ModelMessage

from ._protocol import HistoryStore, HistoryStoreError

__all__ = [
    "HistoryDatabase",
    "HistoryStoreConflictError",
    "SearchHit",
    "SearchQueryError",
    "SearchableHistoryStore",
    "SessionSummary",
]


class HistoryStoreConflictError(HistoryStoreError):
    """Another writer appended to the session since this store last read it; nothing was written.

    Reload (`await store.load()`) and run the turn again on top of what the other writer recorded.
    """


class SearchQueryError(HistoryStoreError, ValueError):
    """A search query with nothing searchable in it (the message says what to send instead)."""


@dataclass(frozen=True)
class SessionSummary:
    """One session of a [`HistoryDatabase`][summarization_pydantic_ai.HistoryDatabase]."""

    session_id: str
    messages: int
    """Recorded messages and summaries (versions of one message count once)."""
    size_bytes: int
    """The size of its records (every version) as stored."""
    created_at: datetime | None
    """When its first record was written (UTC), if known."""
    updated_at: datetime | None
    """When its latest record was written (UTC), if known."""


@dataclass(frozen=True)
class SearchHit:
    """One message matching a search, with what a reader needs to judge it and read around it."""

    session_id: str
    message_id: str
    position: int
    """Its place in the session (0-based, in recorded order; versions keep the place of the first)."""
    roles: str
    """Space-separated roles of its parts: user, assistant, tool, summary, system."""
    tool_names: str
    """Space-separated names of the tools it calls or returns from."""
    timestamp: str
    """ISO 8601, as recorded in the message ('' when it has none)."""
    body: str
    """The message as text (labels like `User:`), plus any text added with `add_search_text`."""
    score: float
    """Relevance: higher is better. Comparable within one search, not across stores."""


@runtime_checkable
class SearchableHistoryStore(HistoryStore, Protocol):
    """A `HistoryStore` of one session of a database, whose messages can be searched.

    Search queries are plain text: words and "quoted phrases" (`word*` matches a prefix). A message matches when it
    contains any term; messages with more (and rarer) terms rank first, equal scores in recorded order. Case and
    diacritics are ignored; CJK text is matched character by character. Only the latest version of a message is
    searched. A query without a searchable word raises `SearchQueryError`.
    """

    @property
    def session_id(self) -> str: ...

    async def search(
        self,
        query: str,
        *,
        roles: Sequence[str] = (),
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchHit]:
        """Messages of this session matching `query`, best first. `roles` keeps messages with any of those roles,
        `tool_name` those calling or returning from that tool, `since`/`until` (ISO 8601, inclusive) bound the
        timestamp."""
        ...

    async def add_search_text(self, message_id: str, text: str) -> None:
        """Index `text` with the recorded message `message_id` (e.g. a tool output kept outside the history);
        replaces text added before for that message. An unknown id raises `HistoryStoreError`."""
        ...

    async def search_texts(self) -> dict[str, str]:
        """The texts added with `add_search_text`, by message id."""
        ...

    async def load_versions(self) -> list[ModelMessage]:
        """Every record as written, older versions of edited messages included, in recording order: appending
        them in this order to an empty store reproduces this one (what `copy_sessions` does)."""
        ...


@runtime_checkable
class HistoryDatabase(Protocol):
    """The histories of many sessions in one place (see the module docs for concurrency)."""

    @property
    def url(self) -> str:
        """Where it is, as a URL with any password redacted (safe to log)."""
        ...

    def session(self, session_id: str) -> SearchableHistoryStore:
        """The store of one session (created by its first append). Does no I/O; an invalid id raises
        `InvalidSessionIdError`."""
        ...

    async def sessions(self) -> list[SessionSummary]:
        """Every session holding at least one record, most recently updated first."""
        ...

    async def delete_session(self, session_id: str) -> bool:
        """Delete a session's records and search text; `False` when there was no such session."""
        ...

    async def search(
        self,
        query: str,
        *,
        session_ids: Sequence[str] | None = None,
        roles: Sequence[str] = (),
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchHit]:
        """Messages matching `query` across sessions (all, or `session_ids`), best first; see
        `SearchableHistoryStore.search` for the query language and filters."""
        ...

    async def close(self) -> None:
        """Release connections and files; stores of this database cannot be used afterwards."""
        ...
