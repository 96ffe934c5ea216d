"""Thinning what a planned reduction keeps: superseded outputs become pointers, older bulky outputs their ends.

Superseded outputs: a tool output a later call made stale, replaced by a short pointer during a reduction.

A file read is superseded when the same file is read again or changed later (the later read, or a new read, has
its current content); a page snapshot when a later snapshot was taken (the page it shows is gone). Keeping the
stale copy verbatim costs its tokens on every request. Replacing it rewrites the cached prefix from that message
on, so it is done only as part of a planned reduction (which rewrites that part anyway), never one by one: the
reducing steps call `supersede_outputs` on what they keep when their `CachePolicy` has `supersede=True`.

The pointer keeps the call id (the call and its return stay paired), names the later call that superseded it,
and is marked under `SUPERSEDED_METADATA_KEY`; the original stays in the history store.

Older bulky outputs: an output the model has already acted on, above `max_chars`, keeps its head and tail
(`thin_outputs`); the latest exchange and failed calls are never touched. A reduction that keeps such thinned
messages reaches further back for the same tokens: more of the session's decisions, errors and file names stay
in the working context.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from ._artifacts import changed_path, tool_args
from ._events import ToolResultsCompressed
from ._render import elide_middle
from ._tool_patterns import DEFAULT_SNAPSHOT_TOOLS

__all__ = [
    "DEFAULT_READ_TOOLS",
    "SUPERSEDED_METADATA_KEY",
    "THINNED_METADATA_KEY",
    "supersede_outputs",
    "thin_outputs",
    "thinning_event",
]

SUPERSEDED_METADATA_KEY = "summarization_pydantic_ai.superseded"
"""Set in a superseded `ToolReturnPart.metadata`: `{"by": the later call id, "chars": the original's length}`."""
DEFAULT_READ_TOOLS: tuple[str, ...] = ("read_file", "read", "view", "view_file", "cat", "open_file", "*read_file*")
"""Tool-name patterns (`fnmatch`, case-insensitive) of calls that read a file named by a `path`-like argument."""
THINNED_METADATA_KEY = "summarization_pydantic_ai.thinned"
"""Set in a thinned `ToolReturnPart.metadata`: `{"chars": the original's length}`."""
_PATH_KEYS = ("path", "file_path", "filename", "file")
_MIN_CHARS = 200
"""A shorter output is left as it is: its pointer would save next to nothing."""


def _matches(name: str, patterns: Sequence[str]) -> bool:
    lowered = name.lower()
    return any(fnmatchcase(lowered, pattern.lower()) for pattern in patterns)


def _read_path(part: ToolCallPart, read_tools: Sequence[str]) -> str | None:
    if not _matches(part.tool_name, read_tools):
        return None
    args = tool_args(part)
    path = next((args[key] for key in _PATH_KEYS if isinstance(args.get(key), str)), None)
    return path.strip() or None if isinstance(path, str) else None


def _superseding_calls(
    messages: Sequence[ModelMessage], read_tools: Sequence[str], snapshot_tools: Sequence[str]
) -> dict[str, tuple[str, str]]:
    """{call id of a superseded read or snapshot: (what it read, the later call id that superseded it)}, from one
    backward pass over the responses."""
    later_path: dict[str, str] = {}  # path -> the first call after this point that read or changed it
    later_snapshot: str | None = None
    stale: dict[str, tuple[str, str]] = {}
    for message in reversed(messages):
        if not isinstance(message, ModelResponse):
            continue
        for part in reversed(message.parts):
            if not isinstance(part, ToolCallPart) or not part.tool_call_id:
                continue
            read = _read_path(part, read_tools)
            if read is not None and read in later_path:
                stale[part.tool_call_id] = (f"{part.tool_name}({read})", later_path[read])
            elif _matches(part.tool_name, snapshot_tools) and later_snapshot is not None:
                stale[part.tool_call_id] = (f"{part.tool_name}()", later_snapshot)
            for path in (read, changed_path(part)):
                if path is not None:
                    later_path[path] = part.tool_call_id
            if _matches(part.tool_name, snapshot_tools):
                later_snapshot = part.tool_call_id
    return stale


def supersede_outputs(
    messages: list[ModelMessage],
    *,
    start: int = 0,
    read_tools: Sequence[str] = DEFAULT_READ_TOOLS,
    snapshot_tools: Sequence[str] = DEFAULT_SNAPSHOT_TOOLS,
) -> list[ModelMessage]:
    """`messages` with every superseded read or snapshot output from `start` on, before the latest exchange (the
    model is answering it), replaced by a pointer (the input list itself when there is none). Pair-safe: only
    return contents change; a failed call's output is never replaced."""
    stale = _superseding_calls(messages, read_tools, snapshot_tools)
    if not stale:
        return messages
    return _replace_returns(messages, start, lambda part: _pointer(part, stale))


def _pointer(part: ToolReturnPart, stale: dict[str, tuple[str, str]]) -> ToolReturnPart:
    found = stale.get(part.tool_call_id)
    metadata: Any = part.metadata
    if (
        found is None
        or part.outcome != "success"
        or (isinstance(metadata, dict) and SUPERSEDED_METADATA_KEY in metadata)
    ):
        return part
    text = part.model_response_str()
    if len(text) < _MIN_CHARS:
        return part
    what, by = found
    if what.endswith("()"):
        note = f"[superseded: an older output of {what}; the later call {by} shows the current state]"
    else:
        note = f"[superseded: {what} was read again or changed later (call {by}); read it again if you need it]"
    if len(note) >= len(text):
        return part  # a pointer must save something
    previous = cast(dict[str, Any], metadata) if isinstance(metadata, dict) else {}
    marks = {**previous, SUPERSEDED_METADATA_KEY: {"by": by, "chars": len(text)}}
    return replace(part, content=note, metadata=marks)


def thin_outputs(
    messages: list[ModelMessage],
    *,
    max_chars: int,
    read_tools: Sequence[str] = DEFAULT_READ_TOOLS,
    snapshot_tools: Sequence[str] = DEFAULT_SNAPSHOT_TOOLS,
) -> list[ModelMessage]:
    """`supersede_outputs`, then every other tool output before the latest exchange cut to its head and tail
    within `max_chars` (failed calls and already thinned outputs untouched). The input list itself when nothing
    changed."""
    result = supersede_outputs(messages, read_tools=read_tools, snapshot_tools=snapshot_tools)
    return _replace_returns(result, 0, lambda part: _thinned(part, max_chars))


def _replace_returns(
    messages: list[ModelMessage], start: int, replace_part: Callable[[ToolReturnPart], ToolReturnPart]
) -> list[ModelMessage]:
    """`messages` with each tool return from `start` up to the latest exchange passed through `replace_part`; the
    input list itself when no part changed (a changed message is a new object, the others are the same)."""
    result: list[ModelMessage] | None = None
    for i in range(start, _latest_exchange(messages)):
        message = messages[i]
        if not isinstance(message, ModelRequest):
            continue
        parts = [replace_part(p) if isinstance(p, ToolReturnPart) else p for p in message.parts]
        if any(new is not old for new, old in zip(parts, message.parts, strict=True)):
            if result is None:
                result = list(messages)
            result[i] = replace(message, parts=parts)
    return messages if result is None else result


def _latest_exchange(messages: Sequence[ModelMessage]) -> int:
    """Where the latest response that called tools is (its exchange is left whole), else the end."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ModelResponse) and any(isinstance(p, ToolCallPart) for p in message.parts):
            return i
    return len(messages)


_ERROR_LINE = re.compile(r"error|fail|exception|traceback|assert|panic|fatal", re.IGNORECASE)
_ERROR_LINES_KEPT = 5
_LINE_CHARS = 200


def _thinned(part: ToolReturnPart, max_chars: int) -> ToolReturnPart:
    """The output's first and last lines and its error lines (a test log keeps what failed), within about
    `max_chars` plus the error lines; a failed call, or a short or already thinned output, is left as it is."""
    metadata: Any = part.metadata
    previous = cast(dict[str, Any], metadata) if isinstance(metadata, dict) else {}
    if part.outcome != "success" or SUPERSEDED_METADATA_KEY in previous or THINNED_METADATA_KEY in previous:
        return part
    text = part.model_response_str()
    if len(text) <= max_chars:
        return part
    lines = text.splitlines() or [text]
    errors = [_clip(line) for line in lines[1:-1] if _ERROR_LINE.search(line)][:_ERROR_LINES_KEPT]
    ends = elide_middle(text, max_chars) if len(lines) < 3 else "\n".join([_clip(lines[0]), *errors, _clip(lines[-1])])
    note = f"[{len(text):,} chars cut to their ends; call {part.tool_call_id} has the whole output]"
    content = f"{ends}\n{note}"
    if len(content) >= len(text):
        return part  # the ends and the note would not be shorter
    marks = {**previous, THINNED_METADATA_KEY: {"chars": len(text)}}
    return replace(part, content=content, metadata=marks)


def _clip(line: str) -> str:
    return line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 1] + "…"


def thinning_event(
    processor: str, before: Sequence[ModelMessage], after: Sequence[ModelMessage]
) -> ToolResultsCompressed | None:
    """The `ToolResultsCompressed` event of a thinning from `before` to `after` (same length), or `None`."""
    ids: list[str] = []
    chars_before = chars_after = 0
    for old, new in zip(before, after, strict=True):
        if old is new or not isinstance(new, ModelRequest):
            continue
        for part in new.parts:
            if not isinstance(part, ToolReturnPart):
                continue
            metadata: Any = part.metadata
            if not isinstance(metadata, dict):
                continue
            marks = cast(dict[str, Any], metadata)
            mark = marks.get(THINNED_METADATA_KEY) or marks.get(SUPERSEDED_METADATA_KEY)
            if isinstance(mark, dict) and part.tool_call_id not in ids:
                ids.append(part.tool_call_id)
                chars_before += int(cast(dict[str, Any], mark).get("chars", 0))
                chars_after += len(part.model_response_str())
    if not ids:
        return None
    return ToolResultsCompressed(processor, len(ids), chars_before, chars_after, tuple(ids))
