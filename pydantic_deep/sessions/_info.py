"""`SessionInfo`: what a listing shows of one session, read from its store's catalogue without reading its
records (`SessionCatalog`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from summarization_pydantic_ai.cost import CostTotals
from summarization_pydantic_ai.store import SessionCatalog, read_catalog

__all__ = ["METADATA_FILE", "SessionInfo", "describe", "read_metadata", "session_info"]

METADATA_FILE = "session.json"
"""Written by `SessionManager.create` and `fork` (creation time, where a fork comes from); optional: a session
written by `ContextManagerMiddleware` alone has none."""
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
    """When the history was last written (UTC)."""
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
    model: str | None = None
    """The model of the latest response (`provider:model`)."""


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def read_metadata(session_dir: Path) -> dict[str, Any]:
    """`session.json` as a dict (`{}` when it is missing or unreadable: it is optional)."""
    try:
        data = json.loads((session_dir / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}


def describe(session_id: str, session_dir: Path) -> SessionInfo:
    """The `SessionInfo` of a session directory, from its history's catalogue (`read_catalog`: the sidecar, or the
    records folded again when it is missing or stale); a history that cannot be read gives one with `error` set."""
    messages_path = session_dir / "messages.json"
    metadata = read_metadata(session_dir)
    try:
        folder_time = _utc(session_dir.stat().st_mtime)
        entry = read_catalog(messages_path, session_id)
    except OSError as exc:
        return _broken(session_id, session_dir, f"cannot read {messages_path}: {exc}")
    if entry is None:  # created, never run
        created = _parse_time(metadata.get("created")) or folder_time
        entry = SessionCatalog(session_id, 0, 0, None, None, None, CostTotals(), 0, None, created)
    return session_info(entry, session_dir, metadata, created=folder_time)


def session_info(
    entry: SessionCatalog,
    session_dir: Path,
    metadata: Mapping[str, object],
    *,
    created: datetime,
    history_url: str | None = None,
) -> SessionInfo:
    """The `SessionInfo` of a catalogue entry: created from the metadata, else the store, else the first message,
    else `created`; `error` set for a history file that holds bytes but not one readable message."""
    error = None
    if (
        entry.created_at is None
        and entry.size_bytes > _EMPTY_FILE_BYTES
        and not entry.message_count + entry.compactions
    ):
        error = f"{session_dir / 'messages.json'} holds no readable message (damaged, or not written by this library)"
    created = _parse_time(metadata.get("created")) or entry.created_at or entry.first_message_at or created
    forked_from = metadata.get("forked_from")
    return SessionInfo(
        id=entry.session_id,
        path=session_dir,
        messages_path=session_dir / "messages.json",
        created=created,
        last_active=entry.updated_at or created,
        message_count=entry.message_count,
        first_prompt=entry.first_prompt,
        size_bytes=entry.size_bytes,
        compactions=entry.compactions,
        forked_from=forked_from if isinstance(forked_from, str) else None,
        error=error,
        cost=entry.cost,
        history_url=history_url,
        model=entry.model,
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
