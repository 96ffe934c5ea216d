"""Reading a session's history file without writing it: the working context, and the history at a message id."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Generator
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart

from summarization_pydantic_ai import (
    HistoryStoreError,
    JsonHistoryStore,
    get_message_id,
    is_summary_message,
    summary_info,
    validate_history,
    working_context,
)

__all__ = [
    "CorruptSessionError",
    "ForkPointError",
    "MessageNotFoundError",
    "check_cut",
    "cut_records",
    "history_at",
    "history_in_records",
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


_IMPORT_HINT = (
    " (a JSON array of pydantic-ai messages written by something else is imported, with ids, by "
    "JsonHistoryStore.open(path).load_sync(), which keeps the original beside it as .imported)"
)


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
        raise CorruptSessionError(f"{exc}{_IMPORT_HINT if 'not a messages.json' in str(exc) else ''}") from exc
    finally:
        if ours:
            store.close()


def _refuse_unreadable(store: JsonHistoryStore) -> None:
    """A file with bytes but not one readable record is not an empty session: say so instead of returning []."""
    report = store.last_report
    if report is not None and report.records == 0 and report.damaged:
        raise CorruptSessionError(f"{report.describe()}; no message can be read{_IMPORT_HINT}")


def _check_id(path: Path, message_id: str) -> None:
    if not isinstance(message_id, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"a message id must be a string, got {type(message_id).__name__}")
    if not path.exists():
        raise MessageNotFoundError(f"no message with id {message_id!r}: {path} does not exist (no history yet)")


def _read_until(store: JsonHistoryStore, path: Path, message_id: str) -> list[ModelMessage]:
    try:
        return store.read_sync(None, message_id, limit=sys.maxsize).messages
    except HistoryStoreError:
        _refuse_unreadable(store)
        # Opened (a report exists) but the id is not there: a wrong id, not a damaged file.
        if store.last_report is not None and message_id not in store:
            raise MessageNotFoundError(f"no message with id {message_id!r} in {path}") from None
        raise


def records_until(path: Path, message_id: str | None) -> list[ModelMessage]:
    """Every record of `path` (messages and summaries, in recorded order) up to and including `message_id`
    (default: all), refused with `ForkPointError` where a history cannot be cut. Sync: call it from a thread."""
    if message_id is None:
        if not path.exists():
            return []
        with reading(path) as store:
            records = store.load_all_sync()
            _refuse_unreadable(store)
            return records
    _check_id(path, message_id)
    with reading(path) as store:
        records = _read_until(store, path, message_id)
        check_cut(records[-1], working_context(records), _next_in(store, records[-1]), str(path))
        return records


def history_at(path: Path, message_id: str | None) -> list[ModelMessage]:
    """The history as the agent had it right after `message_id` was recorded: the original messages up to it
    when no compaction happened before it, else the latest summary before it with what it kept, and what
    followed up to it. `None`: the working context now (what `resume` returns)."""
    if message_id is None:
        return read_working(path)
    _check_id(path, message_id)
    with reading(path) as store:
        working = store.load_sync()
        _refuse_unreadable(store)
        history = _cut_of_working(working, message_id)
        if history is None:  # a point before the latest compaction: the originals are read
            records = _read_until(store, path, message_id)
            point, history = records[-1], working_context(records)
        else:
            point = history[-1]
        check_cut(point, history, _next_in(store, point), str(path))
        return history


def cut_records(records: list[ModelMessage], message_id: str, where: str) -> list[ModelMessage]:
    """The records (`load_all()` of a session, in recorded order) up to and including `message_id`, refused with
    `ForkPointError` where a history cannot be cut (the same rule as `records_until`, for records in memory: a
    database session's)."""
    at = _index_of(records, message_id, where)
    cut = records[: at + 1]
    check_cut(cut[-1], working_context(cut), _next_of(records, at), where)
    return cut


def history_in_records(records: list[ModelMessage], message_id: str, where: str) -> list[ModelMessage]:
    """The history as the agent had it right after `message_id`, from a session's records in memory (what
    `history_at` gives for a file)."""
    at = _index_of(records, message_id, where)
    history = working_context(records[: at + 1])
    check_cut(records[at], history, _next_of(records, at), where)
    return history


def _index_of(records: list[ModelMessage], message_id: str, where: str) -> int:
    if not isinstance(message_id, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"a message id must be a string, got {type(message_id).__name__}")
    for i, record in enumerate(records):
        if get_message_id(record) == message_id:
            return i
    raise MessageNotFoundError(f"no message with id {message_id!r} in {where}")


def _next_of(records: list[ModelMessage], at: int) -> Callable[[], ModelMessage | None]:
    return lambda: records[at + 1] if at + 1 < len(records) else None


def _next_in(store: JsonHistoryStore, point: ModelMessage) -> Callable[[], ModelMessage | None]:
    def following() -> ModelMessage | None:
        message_id = get_message_id(point)
        after = store.read_sync(message_id, None, limit=2).messages[1:] if message_id else []
        return after[0] if after else None

    return following


def _cut_of_working(working: list[ModelMessage], message_id: str) -> list[ModelMessage] | None:
    """The history at `message_id` taken from the working context, when the point came after the latest
    compaction (the common case for a recent checkpoint: only the working context is decoded); else `None`."""
    ids = [get_message_id(m) for m in working]
    if message_id not in ids:
        return None
    at = ids.index(message_id)
    summary_at = next((i for i in range(len(working) - 1, -1, -1) if is_summary_message(working[i])), None)
    if summary_at is None:
        return working[: at + 1]  # never compacted: the working context is every record
    info = summary_info(working[summary_at]) or {}
    kept_after = info.get("working_after")
    if at > summary_at and isinstance(kept_after, list) and message_id not in kept_after:
        return working[: at + 1]  # recorded after the summary (the ones it kept were recorded before it)
    return None


def check_cut(
    point: ModelMessage, history: list[ModelMessage], following: Callable[[], ModelMessage | None], where: str
) -> None:
    """Refuse a cut at `point` (giving `history`) that would leave tool calls without their results (never split a
    call from its return), or a history with no user turn to continue from. `following()`: the record after the
    point (read only to say where to cut instead)."""
    message_id = get_message_id(point)
    if isinstance(point, ModelResponse) and any(isinstance(p, ToolCallPart) for p in point.parts):
        after = following()
        before = get_message_id(history[-2]) if len(history) > 1 else None
        results = f"{get_message_id(after)!r} (with their results)" if after is not None else "a later message"
        raise ForkPointError(
            f"message {message_id!r} of {where} holds tool calls whose results come after it; cut at {results} "
            f"or at {before!r} (before the calls)"
        )
    if any(p.kind == "summary_only" for p in validate_history(history, for_request=False)):
        raise ForkPointError(
            f"message {message_id!r} of {where}: the history up to it holds summaries and no user turn to "
            "continue from; cut at a later message"
        )


def read_working(path: Path) -> list[ModelMessage]:
    """The working context of `path` (`HistoryStore.load()`), `[]` when there is no file yet."""
    if not path.exists():
        return []
    with reading(path) as store:
        working = store.load_sync()
        _refuse_unreadable(store)
        return working
