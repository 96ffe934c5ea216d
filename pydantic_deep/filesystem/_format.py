"""What the file tools show the model: `read_file`'s numbered pages (with cut-line markers and a paging hint), `ls`
listings and `grep` matches, within their size limits."""

from __future__ import annotations

import json

from ..backends import FileInfo, FilePage, GrepMatch, text_page

__all__ = [
    "DEFAULT_READ_LIMIT",
    "MAX_ENTRIES",
    "MAX_LINE_CHARS",
    "MAX_OUTPUT_CHARS",
    "check_page",
    "format_grep",
    "format_ls",
    "format_page",
    "number_lines",
]


DEFAULT_READ_LIMIT = 2_000
"""Lines `read_file` returns when the model gives no `limit`."""
MAX_LINE_CHARS = 2_000
"""Longer lines are cut (with a marker) in `read_file` and `grep` output."""
MAX_OUTPUT_CHARS = 100_000
MAX_ENTRIES = 1_000


def _cut(line: str, max_chars: int) -> str:
    if len(line) <= max_chars:
        return line
    return line[:max_chars] + f"… [line cut: {len(line) - max_chars:,} more chars]"


def check_page(offset: int, limit: int) -> None:
    if offset < 0:
        raise ValueError(f"offset must be 0 or more (the number of lines to skip), got {offset}")
    if limit < 1:
        raise ValueError(f"limit must be at least 1 (the number of lines to return), got {limit}")


def number_lines(
    text: str,
    path: str,
    offset: int = 0,
    limit: int = DEFAULT_READ_LIMIT,
    *,
    max_line_chars: int = MAX_LINE_CHARS,
    max_output_chars: int = MAX_OUTPUT_CHARS,
) -> str:
    """`read_file`'s output: lines `offset+1 …` numbered like `cat -n` (1-based), with a paging hint when more remain.

    Lines keep their `\r` (a CRLF file reads back as CRLF, so text copied from it matches in `edit_file`).

    >>> for line in number_lines("a\\nb\\nc\\n", "/f.txt", offset=0, limit=2).splitlines():
    ...     print(line.replace("\\t", " | "))
         1 | a
         2 | b
    ... 1 more lines: call read_file("/f.txt", offset=2, limit=2)
    """
    check_page(offset, limit)
    page = text_page(text, offset, limit, max_line_chars=max_line_chars, max_chars=max_output_chars)
    return format_page(page, path, limit, max_output_chars=max_output_chars)


def format_page(page: FilePage, path: str, limit: int, *, max_output_chars: int = MAX_OUTPUT_CHARS) -> str:
    """A `FilePage` as `read_file` shows it: numbered lines, cut lines marked, a paging hint when more remain."""
    if page.total_lines == 0:
        return f"({path} is empty)"
    if not page.lines and page.total_lines is not None:
        total = page.total_lines
        raise ValueError(
            f"offset {page.offset} is past the end of {path}, which has {total} lines: call read_file with an "
            f"offset below {total}"
        )
    out: list[str] = []
    used = 0
    for index, (text, cut) in enumerate(zip(page.lines, page.cut, strict=True)):
        marker = f"… [line cut: {cut:,} more chars]" if cut else ""
        line = f"{page.offset + index + 1:>6}\t{text}{marker}"
        if out and used + len(line) + 1 > max_output_chars:
            break
        out.append(line)
        used += len(line) + 1
    end = page.offset + len(out)
    shown_all = len(out) == len(page.lines)
    if page.undecodable:
        out.append(
            "(some bytes of this file are not valid UTF-8: they are shown as \ufffd; edit_file keeps them as they "
            "are, but old_string cannot contain \ufffd)"
        )
    call = f"call read_file({json.dumps(path)}, offset={end}, limit={limit})"
    if page.total_lines is not None and end < page.total_lines:
        out.append(f"... {page.total_lines - end} more lines: {call}")
    elif page.total_lines is None:
        more = f"{page.remaining_bytes:,} more bytes" if shown_all else "more lines"
        out.append(f"... more lines follow ({more}): {call}")
    return "\n".join(out)


def format_ls(entries: list[FileInfo], path: str, *, max_entries: int = MAX_ENTRIES) -> str:
    """`ls` output: one entry per line, directories with a trailing `/`, files with their size."""
    if not entries:
        return f"{path} is empty."
    lines = [f"{e.path}/" if e.is_dir else f"{e.path}  ({e.size:,} bytes)" for e in entries[:max_entries]]
    if len(entries) > max_entries:
        lines.append(f"... and {len(entries) - max_entries} more entries: use glob to narrow the listing")
    return "\n".join(lines)


def format_grep(matches: list[GrepMatch], capped: bool, *, max_line_chars: int = MAX_LINE_CHARS) -> str:
    """`grep` output: `path:line: text` per match, with a note when the result cap was hit."""
    lines = [f"{m.path}:{m.line_number}: {_cut(m.line, max_line_chars)}" for m in matches]
    if capped:
        lines.append(f"(showing the first {len(matches)} matches: narrow the pattern, path or glob to see the rest)")
    return "\n".join(lines)
