"""Structure-aware previews of large tool outputs, shown to the model in place of an evicted output.

`make_preview` gives a bounded, plain-text preview whose first line says what the content is
(`JSON object, 12 keys, 300,512 chars`); the rest depends on the kind of content:

- **json** — nesting depth and value count, the top-level keys with their value shapes and share of the size,
  the main array (the longest one near the root) with the keys its records share, its first three items and
  the last one, abbreviated. JSON lines are previewed as a collection of records (by line number); structured
  logs among them also get level counts and their error records.
- **csv** — the exact row and column counts, the header with inferred column types, ragged rows, the first
  three rows and the last one (with their line numbers). TSV and `;`/`|`-separated tables too.
- **log** — line count, error and warning counts, level counts, the time span, the commands run (`$ ...`),
  the distinct error lines with their line numbers (tracebacks condensed) and the last 10 lines.
- **snapshot** — an accessibility tree (Playwright aria snapshot, Chrome DevTools MCP snapshot, JSON) or an
  HTML page: element counts, the interactive elements (buttons, links, inputs...) with names and refs,
  nested under their landmarks to `snapshot_depth` levels, headings, page title and URL.
- **text** — the first 5 and last 5 lines and how many were left out.

Line numbers are 1-based and count `\\n`-separated lines, so the model can page the saved file from them.
Everything is pure and bounded: the preview never exceeds `max_chars`, and no input makes it raise (a
structure that cannot be read falls back to the text preview, which says why).

Usage:

    >>> from summarization_pydantic_ai.compression import detect_kind, make_preview
    >>> detect_kind('{"users": [{"id": 1}, {"id": 2}], "total": 2}')
    'json'
    >>> print(make_preview("id,name,role\\n1,Ada,admin\\n2,Grace,dev\\n3,Linus,ops\\n", max_chars=300))
    CSV, 3 rows × 3 columns, 49 chars
    header at line 1; 3 data rows
    columns (3):
      id (int), name (text), role (text)
    first 3 rows (line| row):
    2| 1,Ada,admin
    3| 2,Grace,dev
    4| 3,Linus,ops
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from ._common import MAX_LINE_CHARS, Section, assemble, clip, fmt_int, head_lines, plural, split_lines
from ._csv import CsvFormat, csv_preview, sniff_csv
from ._json import JsonDoc, json_preview, parse_json
from ._jsonl import json_lines_preview
from ._log import is_log, log_preview, starts_like_log
from ._snapshot import SnapshotFlavor, detect_snapshot, is_ax_tree, snapshot_preview

__all__ = ["PreviewKind", "detect_kind", "make_preview"]

PreviewKind = Literal["auto", "json", "csv", "log", "snapshot", "text"]
"""What a preview treats the content as; `auto` detects it (`detect_kind`)."""

_KINDS: frozenset[str] = frozenset(get_args(PreviewKind))
_HEAD_LINES = 300
_TAIL_SCAN = 16_384
_TEXT_ENDS = 5


@dataclass(slots=True)
class _Detected:
    """A detection and what it already parsed, so the preview does not parse again."""

    kind: PreviewKind
    doc: JsonDoc | None = None
    csv: CsvFormat | None = None
    flavor: SnapshotFlavor | None = None
    note: str = ""


def _tail_lines(content: str, n: int) -> list[str]:
    chunk = content[-_TAIL_SCAN:]
    lines = split_lines(chunk)
    if len(chunk) < len(content) and len(lines) > 1:
        lines = lines[1:]  # the first one may be cut
    return lines[-n:]


def _detect(content: str) -> _Detected:
    if not content.strip():
        return _Detected("text")
    doc = parse_json(content)
    if doc is not None:
        if doc.records is None and is_ax_tree(doc.value):
            return _Detected("snapshot", doc=doc, flavor="axtree")
        return _Detected("json", doc=doc)
    head = head_lines(content, _HEAD_LINES)
    flavor = detect_snapshot(head, content)
    if flavor is not None:
        return _Detected("snapshot", flavor=flavor)
    complete = len(head) < _HEAD_LINES and sum(len(line) + 1 for line in head) >= len(content)
    fmt = sniff_csv(head[:60], complete=complete or len(head) > 60)
    # a log whose lines happen to split evenly (`10:00:01,123 INFO x`) is still a log, unless it is a table
    # with a real header row and more than two columns
    log_like_table = fmt is not None and (starts_like_log(head[0]) or fmt.columns == 2)
    if fmt is not None and not log_like_table:
        return _Detected("csv", csv=fmt)
    sample = head if complete else head + _tail_lines(content, 100)
    log, strong_share = is_log(sample)
    if fmt is not None and not (log and strong_share >= 0.5):
        return _Detected("csv", csv=fmt)
    if log:
        return _Detected("log")
    return _Detected("text")


_last: tuple[str, _Detected] | None = None
"""The detection `detect_kind` just made, kept for the `make_preview` call on the same string that usually
follows it (`kind = detect_kind(text); make_preview(text, kind)` parses once). Matched by identity, so it can
never be used for other content; taken (cleared) by that call."""


def _take_last(content: str, kind: str) -> _Detected | None:
    global _last
    last = _last
    if last is None or last[0] is not content:
        return None
    _last = None
    return last[1] if kind in ("auto", last[1].kind) else None


def detect_kind(content: str) -> PreviewKind:
    """What `content` looks like: `json`, `csv`, `log`, `snapshot` or `text` (never `auto`).

    JSON: an object or array that parses (or JSON lines). Snapshot: a Playwright aria snapshot, a Chrome
    DevTools snapshot, a JSON accessibility tree or an HTML page. CSV: the first lines split into the same
    number of fields on `,`, tab, `;` or `|`. Log: many lines start with a timestamp or a level, or read like
    console output (tracebacks, `$ ` prompts, `error:` lines). Anything else is text. Only the head (and for
    logs the tail) is sampled, except that a JSON candidate is parsed whole.

        >>> detect_kind("2024-05-01 10:00:01 INFO start\\n2024-05-01 10:00:02 ERROR boom\\n")
        'log'
        >>> detect_kind('- button "Submit" [ref=e12]\\n- link "Home" [ref=e13]\\n- textbox "Email" [ref=e14]')
        'snapshot'
    """
    global _last
    try:
        found = _detect(content)
    except Exception:  # detection is a heuristic: it never fails the caller
        return "text"
    _last = (content, found)
    return found.kind


def _forced(content: str, kind: PreviewKind) -> _Detected:
    if kind == "json":
        doc = parse_json(content)
        return _Detected("json", doc=doc) if doc is not None else _Detected("text", note="not valid JSON")
    if kind == "csv":
        head = head_lines(content, 60)
        fmt = sniff_csv(head, complete=len(head) < 60) or (CsvFormat(",", 0) if "," in content else None)
        return _Detected("csv", csv=fmt) if fmt is not None else _Detected("text", note="no delimiter found")
    if kind == "snapshot":
        doc = parse_json(content)
        if doc is not None and doc.records is None and is_ax_tree(doc.value):
            return _Detected("snapshot", doc=doc, flavor="axtree")
        head = head_lines(content, _HEAD_LINES)
        flavor = detect_snapshot(head, content) or detect_snapshot(head, content, lenient=True)
        if flavor is None:
            return _Detected("text", note="not a recognized snapshot")
        return _Detected("snapshot", flavor=flavor)
    return _Detected(kind)


def _mid_clip(line: str, limit: int) -> str:
    """`line` within `limit` characters, keeping both of its ends."""
    if len(line) <= limit:
        return line
    marker = f" … ({fmt_int(len(line) - limit)} chars) … "
    keep = max(0, limit - len(marker))
    return line[: keep - keep // 2] + marker + line[len(line) - keep // 2 :]


def _text_preview(content: str, max_chars: int, note: str = "") -> str:
    lines = split_lines(content) if content else []
    n = len(lines)
    label = f"Text ({note})" if note else "Text"
    header = f"{label}, {plural(n, 'line')}, {plural(len(content), 'char')}"
    width = len(str(n))
    # lines keep both their ends; when there are only one or two, they share the whole budget
    per_line = MAX_LINE_CHARS if n > 2 else max(MAX_LINE_CHARS, (max_chars - len(header)) // max(n, 1) - 2)

    def numbered(index: int) -> str:
        return f"{index + 1:>{width}}| " + _mid_clip(lines[index], per_line - width - 2)

    if n <= 2 * _TEXT_ENDS:
        body = Section([numbered(i) for i in range(n)], "ends", max_line=per_line)
        return assemble(header, [], [body], max_chars)
    head = [numbered(i) for i in range(_TEXT_ENDS)]
    tail = [numbered(i) for i in range(n - _TEXT_ENDS, n)]
    omitted = n - 2 * _TEXT_ENDS
    gap = f"… {plural(omitted, 'line')} omitted (lines {_TEXT_ENDS + 1}–{n - _TEXT_ENDS}) …"
    return assemble(header, [], [Section(head, "head"), Section(tail, "tail", gap)], max_chars)


def _render(content: str, found: _Detected, max_chars: int, snapshot_depth: int) -> str:
    if found.kind == "json" and found.doc is not None:
        if found.doc.records is not None:
            return json_lines_preview(found.doc, len(content), max_chars)
        return json_preview(found.doc, len(content), max_chars)
    if found.kind == "csv" and found.csv is not None:
        fmt = found.csv
        preview = csv_preview(content, fmt, max_chars)
        if preview is not None:
            return preview
        return _text_preview(content, max_chars, note=f"unreadable as {fmt.label}")
    if found.kind == "log":
        return log_preview(content, split_lines(content), max_chars)
    if found.kind == "snapshot" and found.flavor is not None:
        value: Any = found.doc.value if found.doc is not None else None
        return snapshot_preview(content, found.flavor, max_chars, snapshot_depth, value)
    return _text_preview(content, max_chars, note=found.note)


def make_preview(content: str, kind: PreviewKind = "auto", *, max_chars: int = 2_000, snapshot_depth: int = 4) -> str:
    """A structure-aware preview of `content`, at most `max_chars` characters, starting with a one-line header
    that names the kind and size (`JSON object, 12 keys, 300,512 chars`).

    `kind="auto"` detects the kind (`detect_kind`); a forced kind the content does not fit (`"json"` on text
    that does not parse) falls back to the text preview, whose header says why (`Text (not valid JSON), ...`).
    `snapshot_depth` is how many outline levels a snapshot preview nests before it counts instead of listing.
    Never raises; an unknown `kind` is treated as `auto`, and `max_chars <= 0` gives `""`.

        >>> print(make_preview('{"users": [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Grace"}], "total": 2}'))
        JSON object, 2 keys, 77 chars
        nesting depth 3, 9 values
        top-level keys (share of the size):
          "users": array[2] of object (100%)
          "total": int 2
        $.users item keys:
          id:int, name:str
        $.users: 2 items (2 object); first 2:
          [0] {"id": 1, "name": "Ada"}
          [1] {"id": 2, "name": "Grace"}
    """
    if max_chars <= 0:
        return ""
    try:
        found = _take_last(content, kind)
        if found is None:
            found = _detect(content) if kind == "auto" or kind not in _KINDS else _forced(content, kind)
        preview = _render(content, found, max_chars, snapshot_depth)
    except Exception as error:  # a preview must never fail the eviction that asked for it
        try:
            preview = _text_preview(content, max_chars, note=f"preview failed: {type(error).__name__}")
        except Exception:
            preview = f"Text, {plural(len(content), 'char')}"
    return preview if len(preview) <= max_chars else clip(preview, max_chars)
