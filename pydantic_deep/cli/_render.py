"""Sessions, checkpoints and histories as tables, terminal text, Markdown and JSON."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
)
from rich import box
from rich.table import Table
from rich.text import Text

from summarization_pydantic_ai import format_cost, get_message_id, is_summary_message, render_message, summary_info

from ..checkpoints import Checkpoint
from ..sessions import SessionInfo
from ._ui import format_bytes

__all__ = ["checkpoints_table", "export_json", "export_markdown", "render_history", "role_of", "sessions_table"]

_PROMPT_WIDTH = 36
_MODEL_WIDTH = 24
_WIDE = 130
_PART_CHARS = 1_200


def _when(value: Any, fmt: str = "%Y-%m-%d %H:%M") -> str:
    if isinstance(value, datetime):
        return value.astimezone().strftime(fmt)
    return str(value or "-")


def _clip(text: str | None, width: int = _PROMPT_WIDTH) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def sessions_table(sessions: Sequence[SessionInfo], current: str | None = None, *, width: int = 200) -> Table | Text:
    """The sessions, most recently active first; the model column only on a console of `width` >= 130 (on a narrower
    one the first prompt keeps the room)."""
    if not sessions:
        return Text("No sessions yet: pydantic-deep chat (or pydantic-deep demo) creates one.")
    table = Table(title="Sessions", title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
    table.add_column("id", no_wrap=True, min_width=12)
    table.add_column("last active", no_wrap=True, min_width=11)
    for column, least in (("msgs", 5), ("compactions", 11), ("size", 8), ("cost", 7)):
        table.add_column(column, justify="right", no_wrap=True, min_width=least)
    with_model = width >= _WIDE
    if with_model:
        table.add_column("model", no_wrap=True, overflow="ellipsis", max_width=_MODEL_WIDTH)
    table.add_column("first prompt", no_wrap=True, overflow="ellipsis", max_width=_PROMPT_WIDTH)
    for info in sorted(sessions, key=lambda s: s.last_active, reverse=True):
        marker = "*" if info.id == current else ""
        cells = [
            info.id + marker,
            _when(info.last_active, "%m-%d %H:%M"),
            f"{info.message_count:,}",
            str(info.compactions),
            format_bytes(info.size_bytes),
            format_cost(info.cost) if info.cost.total.requests else "-",
        ]
        if with_model:
            cells.append(_clip(info.model, _MODEL_WIDTH) if info.model else "-")
        cells.append("(unreadable: " + info.error + ")" if info.error else _clip(info.first_prompt))
        table.add_row(*cells)
    return table


def checkpoints_table(checkpoints: Sequence[Checkpoint]) -> Table:
    table = Table(title="Checkpoints", title_justify="left", header_style="bold")
    for column in ("id", "name", "message", "created", "kind"):
        table.add_column(column)
    for checkpoint in sorted(checkpoints, key=lambda c: c.created):
        table.add_row(
            checkpoint.id,
            checkpoint.name or "-",
            str(checkpoint.message_count),
            _when(checkpoint.created),
            "auto" if checkpoint.auto else "named",
        )
    return table


def role_of(message: ModelMessage) -> str:
    if is_summary_message(message):
        return "summary"
    if not isinstance(message, ModelRequest):
        return "assistant"
    kinds = {p.part_kind for p in message.parts}
    if kinds & {"tool-return", "retry-prompt"}:
        return "tool"
    if "user-prompt" in kinds:
        return "user"
    return "system" if "system-prompt" in kinds else "request"


_STYLES = {"user": "bold green", "assistant": "bold cyan", "tool": "dim", "summary": "bold yellow", "system": "dim"}


def _timestamp(message: ModelMessage) -> str:
    stamp = getattr(message, "timestamp", None)
    if stamp is None:
        stamp = next((getattr(p, "timestamp", None) for p in message.parts if hasattr(p, "timestamp")), None)
    return stamp.astimezone().strftime("%H:%M:%S") if isinstance(stamp, datetime) else ""


def _header(index: int, message: ModelMessage) -> str:
    role = role_of(message)
    extra = ""
    if role == "summary":
        covered = (summary_info(message) or {}).get("covered_messages")
        extra = f" of {covered} messages" if covered else ""
    return f"#{index} {role}{extra}  {_timestamp(message)}  id {get_message_id(message) or '-'}"


def render_history(messages: Sequence[ModelMessage], *, full: bool = False) -> list[Text]:
    """Each message as a styled header and its labelled parts (long parts keep head and tail unless `full`)."""
    lines: list[Text] = []
    for index, message in enumerate(messages):
        lines.append(Text(_header(index, message), style=_STYLES.get(role_of(message), "")))
        body = render_message(message, max_part_chars=None if full else _PART_CHARS)
        lines.append(Text("  " + body.replace("\n", "\n  ")))
    return lines


def export_markdown(session_id: str, messages: Sequence[ModelMessage]) -> str:
    out = [f"# Session {session_id}", "", f"{len(messages)} messages (the full history, summaries included).", ""]
    for index, message in enumerate(messages):
        out += [f"## {_header(index, message)}", "", "```text", render_message(message), "```", ""]
    return "\n".join(out)


def export_json(messages: Sequence[ModelMessage]) -> str:
    """pydantic-ai's message JSON (`ModelMessagesTypeAdapter`), ids in each message's metadata."""
    return ModelMessagesTypeAdapter.dump_json(list(messages), indent=2).decode()
