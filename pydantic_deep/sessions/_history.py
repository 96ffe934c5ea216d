"""Reading a session's history file without writing it: the working context, and the history at a message id."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Generator
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart

from summarization_pydantic_ai import HistoryStoreError, JsonHistoryStore, get_message_id, validate_history
from summarization_pydantic_ai.store import working_context

__all__ = [
    "CorruptSessionError",
    "ForkPointError",
    "MessageNotFoundError",
    "history_at",
    "read_working",
    "records_until",
]


class CorruptSessionError(HistoryStoreError):
    """A session's history file cannot be read (not a history written by this library, or unreadable)."""


class MessageNotFoundError(HistoryStoreError, LookupError):
    """A message id that the session's history does not hold."""


class ForkPointError(ValueError):
    """A point a history cannot be cut at: inside a tool exchange (the message holds tool calls whose results
    come after it), or before any user turn (only summaries up to it)."""


@contextlib.contextmanager
def reading(path: Path) -> Generator[JsonHistoryStore]:
    """A read-only view of `path` (this process's writer, if it has one: it sees the latest appends)."""
    store = JsonHistoryStore.reader(path)
    # `reader()` returns the shared writer when this process has one, else a fresh view each call: only a
    # fresh view is ours to close (closing the writer would end the session's run).
    ours = JsonHistoryStore.reader(path) is not store
    try:
        yield store
    except HistoryStoreError as exc:
        if isinstance(exc, MessageNotFoundError):
            raise
        raise CorruptSessionError(str(exc)) from exc
    finally:
        if ours:
            store.close()


def records_until(path: Path, message_id: str | None) -> list[ModelMessage]:
    """Every record of `path` (messages and summaries, in recorded order) up to and including `message_id`
    (default: all). Sync (file I/O): call it from a worker thread."""
    if message_id is not None and not isinstance(message_id, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"a message id must be a string, got {type(message_id).__name__}")
    if not path.exists():
        if message_id is None:
            return []
        raise MessageNotFoundError(f"no message with id {message_id!r}: {path} does not exist (no history yet)")
    with reading(path) as store:
        if message_id is None:
            return store.load_all_sync()
        try:
            records = store.read_sync(None, message_id, limit=sys.maxsize).messages
        except HistoryStoreError:
            # Opened (a report exists) but the id is not there: a wrong id, not a damaged file.
            if store.last_report is not None and message_id not in store:
                raise MessageNotFoundError(f"no message with id {message_id!r} in {path}") from None
            raise
        _refuse_split_exchange(records, store, path)
        if any(p.kind == "summary_only" for p in validate_history(working_context(records), for_request=False)):
            raise ForkPointError(
                f"message {message_id!r} of {path}: the history up to it holds summaries and no user turn to "
                "continue from; cut at a later message"
            )
        return records


def _refuse_split_exchange(records: list[ModelMessage], store: JsonHistoryStore, path: Path) -> None:
    """A history cut right after tool calls would hold calls without results: refuse it, naming the points to
    use instead (never split a tool call from its return)."""
    last = records[-1]
    if not (isinstance(last, ModelResponse) and any(isinstance(p, ToolCallPart) for p in last.parts)):
        return
    message_id = get_message_id(last)
    after = store.read_sync(message_id, None, limit=2).messages[1:] if message_id else []
    before = get_message_id(records[-2]) if len(records) > 1 else None
    results = f"{get_message_id(after[0])!r} (with their results)" if after else "a later message"
    raise ForkPointError(
        f"message {message_id!r} of {path} holds tool calls whose results come after it; cut at {results} "
        f"or at {before!r} (before the calls)"
    )


def history_at(path: Path, message_id: str | None) -> list[ModelMessage]:
    """The history as the agent had it right after `message_id` was recorded: the original messages up to it
    when no compaction happened before it, else the latest summary before it with what it kept, and what
    followed up to it. `None`: the working context now (what `resume` returns)."""
    return working_context(records_until(path, message_id))


def read_working(path: Path) -> list[ModelMessage]:
    """The working context of `path` (`HistoryStore.load()`), `[]` when there is no file yet."""
    if not path.exists():
        return []
    with reading(path) as store:
        return store.load_sync()
