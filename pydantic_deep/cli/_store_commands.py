"""`pydantic-deep sessions | show | search | export --store URL` on a database, and `pydantic-deep migrate`."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic_ai.messages import ModelMessage
from rich.console import Console

from summarization_pydantic_ai.report import write_session_report_async
from summarization_pydantic_ai.store import SearchQueryError

from ..history_search import HistoryArchiveSearch
from ..sessions import SessionManager
from ..storage import Storage, migrate, open_storage
from ._errors import EXIT_USAGE, CliError
from ._render import export_json, export_markdown, render_history, sessions_table

__all__ = ["export_stored", "list_stored", "migrate_stores", "report_stored", "search_stored", "show_stored"]


async def _messages(storage: Storage, session_id: str) -> list[ModelMessage]:
    messages = await storage.history.session(session_id).load_all()
    if not messages:
        raise CliError(f"no session {session_id!r} in {storage.url}; pydantic-deep sessions --store lists them")
    return messages


async def list_stored(url: str, session_dir: Path, console: Console) -> int:
    """The same table as for files (`SessionManager(store=url).list_async()`), under the database's URL."""
    manager = SessionManager(session_dir, store=url)
    try:
        sessions = await manager.list_async()
    finally:
        await manager.close()
    console.print(f"Sessions in {manager.location}", style="dim", markup=False, highlight=False, soft_wrap=True)
    console.print(sessions_table(sessions, width=console.width))
    return 0


async def show_stored(url: str, session_id: str, console: Console, *, full: bool) -> int:
    storage = open_storage(url)
    try:
        messages = await _messages(storage, session_id)
    finally:
        await storage.close()
    console.print(f"Session {session_id}: {len(messages)} messages, {storage.url}", style="bold", markup=False)
    for line in render_history(messages, full=full):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


async def search_stored(url: str, session_id: str, query: str, console: Console) -> int:
    storage = open_storage(url)
    try:
        await _messages(storage, session_id)
        result = await HistoryArchiveSearch(database=storage.history).search(query, session=session_id)
    except SearchQueryError as exc:
        raise CliError(f"bad query {query!r}: {exc}", EXIT_USAGE) from None
    finally:
        await storage.close()
    console.print(result.text, markup=False, highlight=False, soft_wrap=True)
    return 0 if result.hits else 1


async def export_stored(url: str, session_id: str, fmt: str, output: Path | None) -> int:
    storage = open_storage(url)
    try:
        messages = await _messages(storage, session_id)
    finally:
        await storage.close()
    text = export_json(messages) if fmt == "json" else export_markdown(session_id, messages)
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        output.write_text(text, encoding="utf-8")
    return 0


async def report_stored(url: str, session_id: str, out: Path | None, console: Console) -> int:
    storage = open_storage(url)
    try:
        await _messages(storage, session_id)
        target = out if out is not None else Path(f"{session_id}-report.html")
        path = await write_session_report_async(
            storage.history.session(session_id), target, title=f"Session {session_id}"
        )
    except OSError as exc:
        raise CliError(str(exc)) from None
    finally:
        await storage.close()
    console.print(f"Report written to {path}", markup=False, highlight=False, soft_wrap=True)
    return 0


async def migrate_stores(source: str, destination: str, session_ids: list[str] | None, console: Console) -> int:
    report = await migrate(source, destination, session_ids or None)
    console.print(f"Copied {report.summary()}.", markup=False, highlight=False, soft_wrap=True)
    return 0
