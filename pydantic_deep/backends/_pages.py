"""Reading one page of a text file's lines without loading the whole file.

`read_file` asks for lines `offset+1 … offset+limit`. A backend that implements `read_page` (`LocalBackend`,
`StateBackend` and `CompositeBackend` do) streams the file: it skips `offset` lines, keeps at most `limit` lines of at
most `max_line_chars` characters each, stops once `max_chars` characters are kept, and looks at most
`LOOKAHEAD_BYTES` further to say how many lines remain. Showing lines 1-100 of a 1 GB file reads a few kilobytes.

Lines are split at `\\n` only: a `\\r` before it stays part of the line, so a CRLF file reads back as CRLF.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol, runtime_checkable

__all__ = ["LOOKAHEAD_BYTES", "FilePage", "SupportsReadPage", "read_page_from", "text_page"]

LOOKAHEAD_BYTES = 1 << 20
"""How far past a page a reader looks to count the lines that remain (beyond it: "more lines follow")."""
_SKIP_CHUNK = 1 << 16
_CONTINUATION = bytes(range(0x80, 0xC0))


@dataclass(frozen=True)
class FilePage:
    """Lines `offset+1 …` of a text file, as `read_page` returns them."""

    offset: int
    """How many lines precede the page."""
    lines: list[str]
    """The page's lines without their `\\n` (a `\\r` is kept), each cut to at most `max_line_chars` characters."""
    cut: list[int]
    """Per line, how many characters were cut off its end (0 for a whole line)."""
    total_lines: int | None
    """How many lines the file has, or `None` when it goes on past what was read (see `remaining_bytes`)."""
    remaining_bytes: int
    """Bytes of the file after the last line of the page."""
    undecodable: bool
    """Some bytes of the page are not valid UTF-8: they are shown as U+FFFD."""

    @property
    def end(self) -> int:
        """The number of lines up to the end of the page (the `offset` of the next page)."""
        return self.offset + len(self.lines)


@runtime_checkable
class SupportsReadPage(Protocol):
    """A backend that can read one page of a file's lines (the file tools use it when present, else `read`)."""

    async def read_page(self, path: str, offset: int, limit: int, *, max_line_chars: int, max_chars: int) -> FilePage:
        """Lines `offset+1 … offset+limit` of a file (fewer once `max_chars` characters are kept)."""
        ...


def _chars(data: bytes) -> int:
    """The characters UTF-8 `data` holds (every byte that is not a continuation byte starts one)."""
    return len(data.translate(None, _CONTINUATION))


def _lines(file: BinaryIO, cap: int) -> Iterator[tuple[bytes, int, bool]]:
    """Each line of `file` as (its first `cap` bytes without the `\\n`, characters beyond those, whether cut)."""
    while True:
        head = file.readline(cap)
        if not head:
            return
        if head.endswith(b"\n"):
            yield head[:-1], 0, False
            continue
        if len(head) < cap:  # the last line, without a newline
            yield head, 0, False
            return
        extra = 0
        while True:
            rest = file.readline(_SKIP_CHUNK)
            if not rest:
                break
            if rest.endswith(b"\n"):
                extra += _chars(rest[:-1])
                break
            extra += _chars(rest)
        yield head, extra, True


def _decode(head: bytes, extra: int, cut: bool, max_line_chars: int) -> tuple[str, int, bool]:
    """(the line cut to `max_line_chars`, characters cut, whether its kept part holds undecodable bytes)."""
    try:
        text, bad = head.decode("utf-8"), False
    except UnicodeDecodeError as exc:
        text = head.decode("utf-8", "replace")
        bad = not (cut and exc.reason == "unexpected end of data")  # a character cut at the head's end
    if len(text) <= max_line_chars and extra == 0:
        return text, 0, bad
    return text[:max_line_chars], max(len(text) - max_line_chars, 0) + extra, bad


def read_page_from(
    file: BinaryIO, offset: int, limit: int, *, max_line_chars: int, max_chars: int, size: int
) -> FilePage:
    """The page of the open binary `file` (positioned at its start; `size` bytes long) at `offset`, `limit`."""
    cap = 4 * max_line_chars + 4  # enough bytes for max_line_chars characters, and one more
    lines: list[str] = []
    cut: list[int] = []
    undecodable = False
    index = kept = 0
    at_end = False
    reader = _lines(file, cap)
    while len(lines) < limit and kept < max_chars:
        line = next(reader, None)
        if line is None:
            at_end = True
            break
        if index < offset:
            index += 1
            continue
        index += 1
        text, lost, bad = _decode(*line, max_line_chars)
        lines.append(text)
        cut.append(lost)
        undecodable |= bad
        kept += len(text) + 1
    position = file.tell()
    remaining = max(size - position, 0)
    total: int | None = index if at_end else None
    if total is None:
        ahead = file.read(LOOKAHEAD_BYTES + 1)
        if len(ahead) <= LOOKAHEAD_BYTES:
            total = index + ahead.count(b"\n") + (1 if ahead and not ahead.endswith(b"\n") else 0)
            remaining = len(ahead)
    return FilePage(offset, lines, cut, total, remaining, undecodable)


def text_page(text: str, offset: int, limit: int, *, max_line_chars: int, max_chars: int) -> FilePage:
    """The same page of a text already in memory (for backends that hold text, and for those without `read_page`)."""
    data = text.encode("utf-8", "surrogatepass")
    return read_page_from(
        io.BytesIO(data), offset, limit, max_line_chars=max_line_chars, max_chars=max_chars, size=len(data)
    )
