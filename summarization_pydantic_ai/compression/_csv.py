"""CSV/TSV previews: delimiter sniffing over the first lines, then one pass over the whole table for the exact
row count, the header, inferred column types, ragged rows and the first three rows (plus the last one)."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ._common import MAX_LINE_CHARS, Section, assemble, clip, fmt_int, plural, wrap

__all__ = ["CsvFormat", "csv_preview", "sniff_csv"]

_DELIMITERS = (",", "\t", ";", "|")
_NUMBER = re.compile(r"[-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\Z")
_INT = re.compile(r"[-+]?\d+\Z")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\Z")
_BOOL = frozenset({"true", "false", "yes", "no", "t", "f"})
_TYPE_SAMPLE = 200


@dataclass(frozen=True, slots=True)
class CsvFormat:
    """What sniffing found: the delimiter and how many fields most rows have."""

    delimiter: str
    columns: int

    @property
    def label(self) -> str:
        """`CSV`, `TSV` or `CSV (';'-separated)`."""
        if self.delimiter == ",":
            return "CSV"
        if self.delimiter == "\t":
            return "TSV"
        return f"CSV ({self.delimiter!r}-separated)"


def _field_counts(lines: Sequence[str], delimiter: str) -> list[int]:
    try:
        return [len(row) for row in csv.reader(lines, delimiter=delimiter) if row]
    except csv.Error:
        return []


def sniff_csv(lines: Sequence[str], *, complete: bool = True) -> CsvFormat | None:
    """The table format of these first lines, or `None`: the header and at least 90% of the rows must split into
    the same number (≥ 2) of fields, with at least 3 rows (5 when there are only 2 columns). A markdown table
    (`| a | b |`) is not CSV. `complete=False` says the last line may be cut short (it is ignored)."""
    rows = [line for line in lines if line.strip()]
    if not complete and len(rows) > 1:
        rows = rows[:-1]
    if len(rows) < 3:
        return None
    best: CsvFormat | None = None
    best_score = 0.0
    for delimiter in _DELIMITERS:
        if delimiter not in rows[0]:
            continue
        if delimiter == "|" and rows[0].lstrip().startswith("|"):
            continue
        counts = _field_counts(rows, delimiter)
        if len(counts) < 3:
            continue
        columns = counts[0]
        if columns < 2 or (columns == 2 and len(counts) < 5):
            continue
        consistent = sum(1 for c in counts if c == columns) / len(counts)
        if consistent < 0.9:
            continue
        score = consistent + columns / 1000
        if score > best_score:
            best, best_score = CsvFormat(delimiter, columns), score
    if best is not None:
        mean_field = sum(len(r) for r in rows) / (len(rows) * best.columns)
        if mean_field > 200:
            return None  # prose with commas, not a table
    return best


def _cell_type(value: str) -> str:
    if _INT.match(value):
        return "int"
    if _NUMBER.match(value):
        return "float"
    if _DATE.match(value):
        return "date"
    if value.lower() in _BOOL:
        return "bool"
    return "text"


def _column_types(rows: Sequence[Sequence[str]], columns: int) -> list[str]:
    types: list[str] = []
    for c in range(columns):
        seen: set[str] = set()
        empty = False
        for row in rows[:_TYPE_SAMPLE]:
            value = row[c].strip() if c < len(row) else ""
            if not value:
                empty = True
                continue
            seen.add(_cell_type(value))
        if not seen:
            types.append("empty")
            continue
        if seen == {"int", "float"}:
            seen = {"float"}
        name = seen.pop() if len(seen) == 1 else "text"
        types.append(name + ("?" if empty else ""))
    return types


def _join(row: Sequence[str], delimiter: str) -> str:
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="").writerow(row)
    return out.getvalue()


@dataclass(slots=True)
class _Table:
    """What one pass over the table found (rows are data rows, after the header)."""

    header: list[str]
    header_line: int
    count: int = 0
    sample: list[tuple[int, list[str]]] = field(default_factory=list[tuple[int, list[str]]])
    last: tuple[int, list[str]] | None = None
    ragged: int = 0
    first_ragged: int = 0
    widest: int = 0


def _scan(content: str, delimiter: str) -> _Table | None:
    """Read the whole table once, keeping only counts and a sample; `None` when it does not parse."""
    reader = csv.reader(io.StringIO(content, newline=""), delimiter=delimiter)
    table: _Table | None = None
    prev_line = 0
    try:
        for row in reader:
            start, prev_line = prev_line + 1, reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if table is None:
                table = _Table(row, start)
                continue
            table.count += 1
            table.widest = max(table.widest, len(row))
            if len(row) != len(table.header):
                table.ragged += 1
                table.first_ragged = table.first_ragged or start
            if len(table.sample) < _TYPE_SAMPLE:
                table.sample.append((start, row))
            table.last = (start, row)
    except csv.Error:
        return None
    return table


def csv_preview(content: str, fmt: CsvFormat, max_chars: int) -> str | None:
    """The preview of a delimited table, or `None` when the whole content does not read as one (the caller
    falls back to text)."""
    table = _scan(content, fmt.delimiter)
    if table is None or len(table.header) < 2:
        return None
    sample = table.sample
    count = table.count
    if all(_NUMBER.match(f.strip()) for f in table.header if f.strip()):
        # no header row: the first row is data
        sample.insert(0, (table.header_line, table.header))
        count += 1
        names = [f"col{i + 1}" for i in range(len(table.header))]
        header_note = "no header row (columns numbered)"
    else:
        names = table.header
        header_note = f"header at line {table.header_line}"
    columns = len(names)
    head = f"{fmt.label}, {plural(count, 'row')} × {plural(columns, 'column')}, {plural(len(content), 'char')}"
    facts = [f"{header_note}; {plural(count, 'data row')}"]
    if table.ragged:
        facts.append(
            f"{plural(table.ragged, 'row')} with a different number of fields (first at line {table.first_ragged}; "
            f"widest {fmt_int(table.widest)})"
        )
    types = _column_types([row for _, row in sample], columns)
    col_lines = wrap([f"{clip(name.strip() or '(blank)', 40)} ({t})" for name, t in zip(names, types, strict=True)])
    shown = sample[:3]
    if table.last is not None and count > len(shown):
        shown.append(table.last)
    width = len(str(shown[-1][0])) if shown else 1
    row_lines = [clip(f"{n:>{width}}| {_join(row, fmt.delimiter)}", MAX_LINE_CHARS) for n, row in shown]
    more = " and the last" if len(shown) > 3 else ""
    sections = [
        Section(col_lines, "head", f"columns ({columns}):", floor=max_chars // 3),
        Section(row_lines, "head", f"first {min(3, len(shown))} rows{more} (line| row):", floor=max_chars // 3),
    ]
    return assemble(head, facts, sections, max_chars)
