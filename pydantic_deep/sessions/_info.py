"""`SessionInfo`: what a listing shows of one session, read from its files without changing them."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from summarization_pydantic_ai import read_records
from summarization_pydantic_ai.cost import CostLedger, CostTotals

__all__ = ["METADATA_FILE", "SessionInfo", "describe", "read_metadata"]

METADATA_FILE = "session.json"
"""Written by `SessionManager.create` and `fork` (creation time, where a fork comes from); optional: a session
written by `ContextManagerMiddleware` alone has none."""
_FIRST_PROMPT_CHARS = 200
_EMPTY_FILE_BYTES = len(b"[\n]\n")


@dataclass(frozen=True)
class SessionInfo:
    """One session, as `SessionManager.list()` and `get()` describe it."""

    id: str
    path: Path
    """The session's directory, `<base_dir>/sessions/<id>/` (with a database store: its evicted outputs and plans
    on this host; may not exist)."""
    messages_path: Path
    """Its history file, `<path>/messages.json` (may not exist yet: a session created but never run; never
    written with a database store, whose history is at `history_url`)."""
    created: datetime
    """From `session.json`, else the first message's timestamp, else the directory's modification time (UTC)."""
    last_active: datetime
    """When the history file was last written (UTC)."""
    message_count: int
    """Messages recorded (summaries and edits of one message not counted)."""
    first_prompt: str | None
    """The first user prompt (its first 200 characters)."""
    size_bytes: int
    """Size of the history file."""
    compactions: int = 0
    """Summaries recorded: how many times the history was compacted."""
    forked_from: str | None = None
    """`<session id>@<message id>` when the session is a fork."""
    error: str | None = None
    """Why the history cannot be read, for a corrupt session (the listing shows it instead of failing)."""
    cost: CostTotals = field(default_factory=CostTotals)
    """What the recorded history cost (`session_costs` of its records; a fork includes what it copied)."""
    history_url: str | None = None
    """The database holding the history (any password redacted), with a database store; `None`: `messages_path`."""


@dataclass
class _Scan:
    """What was learned of one history file, kept per process so a later listing reads only what was appended."""

    inode: int = 0
    """The file scanned: an atomic rewrite (a repair, an import) makes a new one, read again from the start."""
    first_id: str | None = None
    next_offset: int = 0
    seen: set[str] = field(default_factory=set[str])
    messages: int = 0
    summaries: int = 0
    first_prompt: str | None = None
    first_timestamp: datetime | None = None
    cost: CostLedger = field(default_factory=CostLedger)


_scans: dict[Path, _Scan] = {}
_scans_lock = threading.Lock()


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def read_metadata(session_dir: Path) -> dict[str, Any]:
    """`session.json` as a dict (`{}` when it is missing or unreadable: it is optional)."""
    try:
        data = json.loads((session_dir / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}


def _prompt_of(message: ModelMessage) -> str | None:
    if not isinstance(message, ModelRequest):
        return None
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            content = part.content
            text = content if isinstance(content, str) else " ".join(c for c in content if isinstance(c, str))
            return text[:_FIRST_PROMPT_CHARS]
    return None


def _scan(path: Path, stat: os.stat_result) -> _Scan:
    """Count the records of `path`, reading only what was appended since the last scan of this process."""
    key = path.resolve()
    with _scans_lock:
        previous = _scans.get(key)
    if previous is not None and (previous.inode != stat.st_ino or previous.next_offset > stat.st_size):
        previous = None  # replaced or shrunk: read it all again
    batch = read_records(path, previous.next_offset if previous else 0)
    if previous is not None and batch.first_message_id != previous.first_id:
        previous = None  # the file was replaced: read it all again
        batch = read_records(path)
    scan = previous or _Scan(inode=stat.st_ino, first_id=batch.first_message_id)
    for record in batch.records:
        key_of_record = record.message_id or f"@{record.offset}"
        if key_of_record in scan.seen:
            continue  # a newer version of a message already counted
        scan.seen.add(key_of_record)
        scan.cost.add_messages([record.message])
        if record.is_summary:
            scan.summaries += 1
            continue
        scan.messages += 1
        if scan.first_timestamp is None:
            scan.first_timestamp = getattr(record.message, "timestamp", None)
        if scan.first_prompt is None:
            scan.first_prompt = _prompt_of(record.message)
    scan.next_offset = batch.next_offset
    with _scans_lock:
        _scans[key] = scan
    return scan


def describe(session_id: str, session_dir: Path) -> SessionInfo:
    """The `SessionInfo` of a session directory; a history that cannot be read gives one with `error` set."""
    messages_path = session_dir / "messages.json"
    metadata = read_metadata(session_dir)
    try:
        folder_time = _utc(session_dir.stat().st_mtime)
        stat = messages_path.stat() if messages_path.exists() else None
        scan = _scan(messages_path, stat) if stat is not None else _Scan()
    except OSError as exc:
        return _broken(session_id, session_dir, f"cannot read {messages_path}: {exc}")
    error = None
    if stat is not None and stat.st_size > _EMPTY_FILE_BYTES and not scan.seen:
        error = f"{messages_path} holds no readable message (damaged, or not written by this library)"
    created = _parse_time(metadata.get("created")) or scan.first_timestamp or folder_time
    return SessionInfo(
        id=session_id,
        path=session_dir,
        messages_path=messages_path,
        created=created,
        last_active=_utc(stat.st_mtime) if stat is not None else created,
        message_count=scan.messages,
        first_prompt=scan.first_prompt,
        size_bytes=stat.st_size if stat is not None else 0,
        compactions=scan.summaries,
        forked_from=metadata.get("forked_from") if isinstance(metadata.get("forked_from"), str) else None,
        error=error,
        cost=scan.cost.totals(),
    )


def _broken(session_id: str, session_dir: Path, error: str) -> SessionInfo:
    epoch = datetime.fromtimestamp(0, UTC)
    return SessionInfo(session_id, session_dir, session_dir / "messages.json", epoch, epoch, 0, None, 0, error=error)


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
