"""`pydantic-deep sessions | show | search | export | report`: read a session, change nothing (the search keeps its
index; the report is written where asked)."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic_ai.messages import ModelMessage
from rich.console import Console

from summarization_pydantic_ai import JsonHistoryStore
from summarization_pydantic_ai.report import write_session_report_async

from ..history_search import HistoryArchiveSearch, QueryError
from ..sessions import SessionInfo, SessionManager
from ._errors import EXIT_USAGE, CliError
from ._render import export_json, export_markdown, render_history, sessions_table
from ._state import existing_session

__all__ = ["export_session", "list_sessions", "report_session", "search_session", "show_session"]


def _session(session_dir: Path, session_id: str) -> SessionInfo:
    return existing_session(SessionManager(base_dir=session_dir), session_id)


def _messages(info: SessionInfo) -> list[ModelMessage]:
    """The full history (summaries included), read without a lock and without repairing anything."""
    if not info.messages_path.is_file():
        return []
    return JsonHistoryStore.reader(info.messages_path).load_all_sync()


def list_sessions(session_dir: Path, console: Console) -> int:
    console.print(sessions_table(SessionManager(base_dir=session_dir).list(), width=console.width))
    return 0


def show_session(session_dir: Path, session_id: str, console: Console, *, full: bool = False) -> int:
    info = _session(session_dir, session_id)
    messages = _messages(info)
    console.print(
        f"Session {info.id}: {info.message_count} messages, {info.compactions} compaction(s), {info.messages_path}",
        style="bold",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    for line in render_history(messages, full=full):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


async def search_session(session_dir: Path, session_id: str, query: str, console: Console) -> int:
    info = _session(session_dir, session_id)
    backend = SessionManager(base_dir=session_dir).deps(info.id).backend  # evicted outputs: their full text too
    search = HistoryArchiveSearch(messages_path=info.messages_path, backend=backend)
    try:
        result = await search.search(query)
    except QueryError as exc:
        raise CliError(f"bad query {query!r}: {exc}", EXIT_USAGE) from None
    console.print(result.text, markup=False, highlight=False, soft_wrap=True)
    return 0 if result.hits else 1


def export_session(session_dir: Path, session_id: str, fmt: str, output: Path | None) -> int:
    info = _session(session_dir, session_id)
    messages = _messages(info)
    text = export_json(messages) if fmt == "json" else export_markdown(info.id, messages)
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        output.write_text(text, encoding="utf-8")
    return 0


async def report_session(session_dir: Path, session_id: str, out: Path | None, console: Console) -> int:
    info = _session(session_dir, session_id)
    if not info.messages_path.is_file():
        raise CliError(f"session {info.id} has no history yet ({info.messages_path}): nothing to report", EXIT_USAGE)
    try:
        path = await write_session_report_async(info.messages_path, out, title=f"Session {info.id}")
    except OSError as exc:
        raise CliError(str(exc)) from None
    console.print(f"Report written to {path}", markup=False, highlight=False, soft_wrap=True)
    return 0
