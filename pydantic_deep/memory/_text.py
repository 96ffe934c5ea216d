"""How memory reads to the model: the instructions section and the pages of `read_memory`."""

from __future__ import annotations

from pydantic_ai import ToolFailed

__all__ = ["MAX_INSTRUCTION_CHARS", "MAX_LINE_CHARS", "MAX_READ_CHARS", "READ_LIMIT"]

READ_LIMIT = 1_000
"""Lines `read_memory` returns per call when the model gives no `limit`."""
MAX_READ_CHARS = 100_000
"""`read_memory` stops early (at a line boundary, with a paging hint) once its output would exceed this."""
MAX_LINE_CHARS = 2_000
"""In the instructions, a longer memory line is cut (with a marker); `read_memory` shows it whole."""
MAX_INSTRUCTION_CHARS = 50_000
"""The memory shown in the instructions stops early (with the usual "more lines" note) past this many characters."""

HEADING = "## Agent Memory"
_TOOLS_HINT = (
    "write_memory(content) appends an entry, update_memory(old_text, new_text) corrects or removes one "
    "(new_text='' deletes), read_memory() shows the whole file."
)


def lines_of(text: str) -> list[str]:
    """The file's lines; a trailing newline does not start another line."""
    if text == "":
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def count(n: int, noun: str = "line") -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _cut(line: str, max_chars: int) -> str:
    line = line.removesuffix("\r")
    if len(line) <= max_chars:
        return line
    return line[:max_chars] + f"… [line cut: {len(line) - max_chars:,} more chars; read_memory shows it whole]"


def instructions(text: str, path: str, max_lines: int) -> str:
    """The `## Agent Memory` section for a memory file holding `text` (empty: no memory yet)."""
    lines = lines_of(text)
    if not lines:
        return (
            f"{HEADING}\nYour memory is empty. Save what is worth keeping across sessions (user preferences, "
            "project facts, decisions, lessons learned) with write_memory(content); it will appear here in "
            f"every future session. {_TOOLS_HINT}"
        )
    shown: list[str] = []
    used = 0
    for raw in lines[:max_lines]:
        line = _cut(raw, MAX_LINE_CHARS)
        if shown and used + len(line) + 1 > MAX_INSTRUCTION_CHARS:
            break
        shown.append(line)
        used += len(line) + 1
    parts = [
        f"{HEADING}\nYour persistent memory ({path}, {count(len(lines))}), kept across sessions and "
        f"compactions. {_TOOLS_HINT}"
    ]
    if shown:
        parts.append("\n".join(shown))
    rest = len(lines) - len(shown)
    if rest:
        parts.append(
            f"[{count(rest, 'more line')} of memory not shown: call read_memory(offset={len(shown)}) to read them]"
        )
    return "\n\n".join(parts)


def page(text: str, offset: int, limit: int) -> str:
    """`read_memory`'s output: lines `offset+1 …` exactly as stored, with a note when it is not the whole file.

    Raises `ToolFailed` when `offset` is past the end.
    """
    lines = lines_of(text)
    total = len(lines)
    if total == 0:
        return "Memory is empty. Call write_memory(content) to save something worth remembering."
    if offset >= total:
        raise ToolFailed(f"offset {offset} is past the end of memory, which has {total} lines")
    end = min(total, offset + limit)
    out: list[str] = []
    used = 0
    for index in range(offset, end):
        line = lines[index]
        if out and used + len(line) + 1 > MAX_READ_CHARS:
            end = index
            break
        if len(line) > MAX_READ_CHARS:
            line = line[:MAX_READ_CHARS] + f"… [line cut: {len(line) - MAX_READ_CHARS:,} more chars]"
        out.append(line)
        used += len(line) + 1
    body = "\n".join(out)
    if offset == 0 and end == total:
        return body
    note = f"[memory lines {offset + 1}-{end} of {total}"
    if end < total:
        note += f"; call read_memory(offset={end}) for the rest"
    return f"{body}\n\n{note}]"
