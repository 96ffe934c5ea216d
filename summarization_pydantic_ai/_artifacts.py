"""The artifact trail a tool call leaves: the file it created or changed, the todo list it set.

Read by the deterministic summarizer (so a summary keeps them) and by the quality probes (so they are asked
for). Judged by tool name and arguments, so `write_file`/`edit_file`/`save_chart`/`write_todos` of any toolkit
qualify, and so do plan tools such as Codex's `update_plan` (`{"plan": [{"step": ..., "status": ...}]}`).
"""

from __future__ import annotations

import functools
import json
from typing import Any, cast

from pydantic_ai.messages import ToolCallPart

__all__ = ["TODO_MARKS", "changed_path", "todo_items", "tool_args"]

_CHANGING = ("write", "edit", "create", "patch", "replace", "insert", "append", "move", "rename", "delete", "save")
_PATH_KEYS = ("path", "file_path", "filename", "file")
_TODO_TEXT_KEYS = ("content", "title", "task", "step", "description")

TODO_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
"""Checkbox marks of the todo statuses, as `pydantic_deep`'s `render_todos` writes them."""


def tool_args(part: ToolCallPart) -> dict[str, Any]:
    """A tool call's arguments as a dict (`{}` when they are not a JSON object)."""
    args: Any = part.args
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return {}
    return cast(dict[str, Any], args) if isinstance(args, dict) else {}


@functools.lru_cache(maxsize=1024)
def _changes_files(tool_name: str) -> bool:
    name = tool_name.lower()
    return any(word in name for word in _CHANGING)


def changed_path(part: ToolCallPart) -> str | None:
    """The file a tool call creates or changes (`write_file`, `edit_file`, ...), judged by its name and args."""
    if not _changes_files(part.tool_name):
        return None
    args = tool_args(part)
    path = next((args[key] for key in _PATH_KEYS if isinstance(args.get(key), str)), None)
    return path if path and path.strip() else None


def todo_items(part: ToolCallPart) -> list[tuple[str, str]] | None:
    """`(content, status)` of each item a `write_todos`-style (or `update_plan`-style) call sets, or `None` if it is
    not such a call."""
    name = part.tool_name.lower()
    if "todo" not in name and "plan" not in name:
        return None
    lists = [cast(list[Any], v) for v in tool_args(part).values() if isinstance(v, list)]
    if not lists:
        return None
    items: list[tuple[str, str]] = []
    for item in lists[0]:
        if not isinstance(item, dict):
            continue
        fields = cast(dict[str, Any], item)
        text = next((fields[k] for k in _TODO_TEXT_KEYS if isinstance(fields.get(k), str)), None)
        status = fields.get("status", fields.get("state"))
        if text and isinstance(status, str):
            items.append((text, status))
    if not items and "todo" not in name:
        return None  # a plan tool of another shape: not a todo list (an empty todo list is one, emptied)
    return items
