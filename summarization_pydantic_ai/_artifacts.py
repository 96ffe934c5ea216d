"""The artifact trail a tool call leaves: the file it created or changed, the todo list it set.

Read by the deterministic summarizer (so a summary keeps them) and by the quality probes (so they are asked
for). Judged by tool name and arguments, so `write_file`/`edit_file`/`write_todos` of any toolkit qualify.
"""

from __future__ import annotations

import json
from typing import Any, cast

from pydantic_ai.messages import ToolCallPart

__all__ = ["TODO_MARKS", "changed_path", "todo_items", "tool_args"]

_CHANGING = ("write", "edit", "create", "patch", "replace", "insert", "append", "move", "rename", "delete")
_PATH_KEYS = ("path", "file_path", "filename", "file")
_TODO_TEXT_KEYS = ("content", "title", "task", "description")

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


def changed_path(part: ToolCallPart) -> str | None:
    """The file a tool call creates or changes (`write_file`, `edit_file`, ...), judged by its name and args."""
    if not any(word in part.tool_name.lower() for word in _CHANGING):
        return None
    args = tool_args(part)
    path = next((args[key] for key in _PATH_KEYS if isinstance(args.get(key), str)), None)
    return path if path and path.strip() else None


def todo_items(part: ToolCallPart) -> list[tuple[str, str]] | None:
    """`(content, status)` of each item a `write_todos`-style call sets, or `None` if it is not such a call."""
    if "todo" not in part.tool_name.lower():
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
    return items
