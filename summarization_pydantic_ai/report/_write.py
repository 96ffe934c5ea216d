"""`write_session_report`: read a session's records, build its timeline, write the page."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TypeAlias

from pydantic_ai.messages import ModelMessage

from ..store import HistoryStore, HistoryStoreError, JsonHistoryStore
from ._cost import cost_view
from ._page import render_page
from ._timeline import build_timeline

__all__ = ["ReportSource", "render_session_report", "write_session_report", "write_session_report_async"]

ReportSource: TypeAlias = "str | os.PathLike[str] | HistoryStore"
"""A session's `messages.json` (or the folder holding it), or any `HistoryStore`."""

REPORT_FILE = "report.html"


def _history_file(source: str | os.PathLike[str]) -> Path:
    path = Path(source)
    if path.is_dir():
        path = path / "messages.json"
    if not path.is_file():
        raise HistoryStoreError(f"no history file at {path}: pass a session's messages.json (or its folder)")
    return path


def _default_out(source: ReportSource) -> Path:
    path = source.path if isinstance(source, HistoryStore) else _history_file(source)
    if path is None:
        raise ValueError("this history store has no file: pass out= (where to write the report)")
    return path.parent / REPORT_FILE


def _title(source: ReportSource) -> tuple[str, str]:
    path = source.path if isinstance(source, HistoryStore) else _history_file(source)
    if path is None:
        return "Session report", type(source).__name__
    name = path.parent.name if path.name == "messages.json" else path.stem
    return f"Session {name}", str(path)


def render_session_report(messages: list[ModelMessage], *, title: str, source: str = "") -> str:
    """The report's HTML for a session's records (`HistoryStore.load_all()`)."""
    timeline = build_timeline(messages)
    return render_page(timeline, title=title, source=source, cost=cost_view(messages))


def _write(
    messages: list[ModelMessage], source: ReportSource, out: str | os.PathLike[str] | None, title: str | None
) -> Path:
    default_title, where = _title(source)
    html = render_session_report(messages, title=title or default_title, source=where)
    target = Path(out) if out is not None else _default_out(source)
    if target.is_dir():
        target = target / REPORT_FILE
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write the report to {target}: the folder {target.parent} does not exist")
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, target)  # a reader never sees half a page
    return target


async def write_session_report_async(
    source: ReportSource, out: str | os.PathLike[str] | None = None, *, title: str | None = None
) -> Path:
    """Write the session report of `source` (a `messages.json` path, its folder, or a `HistoryStore`) to `out`
    (a file, or a folder to put `report.html` in; default: `report.html` beside the history file). Returns the
    path written. Reads only: the history is never changed, and a file is read without taking its lock."""
    if isinstance(source, HistoryStore):
        messages = await source.load_all()
    else:
        path = _history_file(source)
        messages = await asyncio.to_thread(JsonHistoryStore.reader(path).load_all_sync)
    return await asyncio.to_thread(_write, messages, source, out, title)


def write_session_report(
    source: ReportSource, out: str | os.PathLike[str] | None = None, *, title: str | None = None
) -> Path:
    """`write_session_report_async` for code outside an event loop (inside one, await the async form)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(write_session_report_async(source, out, title=title))
    raise RuntimeError("write_session_report was called inside an event loop: await write_session_report_async")
