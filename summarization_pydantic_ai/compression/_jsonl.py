"""JSON-lines previews: the records' count, the keys they share and the first three and last records, by line
number. Structured logs (records with a `level` / `severity` / `levelname` key, names or pino-style numbers)
also get their level counts and their error records, like a text log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._common import Section, assemble, fmt_int, number_lines, plural
from ._json import JsonDoc, abbreviate, collection_sections

__all__ = ["json_lines_preview"]

_LEVEL_KEYS = ("level", "severity", "levelname", "lvl", "log.level", "loglevel")
_NUMERIC_LEVELS = {10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL"}  # pino, bunyan
_ALIASES = {"WARNING": "WARN", "ERR": "ERROR", "CRITICAL": "FATAL", "CRIT": "FATAL", "EMERGENCY": "FATAL"}
_ERRORS = frozenset({"ERROR", "FATAL", "SEVERE", "PANIC", "ALERT"})
_MAX_ERRORS = 10


def _level_key(records: Sequence[Any]) -> str | None:
    for record in records[:20]:
        if record.__class__ is dict:
            for key in _LEVEL_KEYS:
                if key in record:
                    return key
    return None


def _level_name(value: Any) -> str | None:
    if isinstance(value, str):
        name = value.strip().upper()
        return _ALIASES.get(name, name) if 0 < len(name) <= 12 else None
    if isinstance(value, int) and not isinstance(value, bool):
        return _NUMERIC_LEVELS.get(value)
    return None


def _levels(doc: JsonDoc, max_chars: int) -> tuple[list[str], Section | None]:
    """(facts, error-records section) for records that carry a level."""
    records = doc.records or []
    key = _level_key(records)
    if key is None:
        return [], None
    counts: dict[str, int] = {}
    errors: list[tuple[int, str]] = []
    error_count = 0
    for record, line in zip(records, doc.record_lines, strict=False):
        if record.__class__ is not dict:
            continue
        name = _level_name(record.get(key))
        if name is None:
            continue
        counts[name] = counts.get(name, 0) + 1
        if name in _ERRORS:
            error_count += 1
            if len(errors) < 200:
                errors.append((line, abbreviate(record)))
    ranked = sorted(counts.items(), key=lambda kv: (kv[0] not in _ERRORS, -kv[1]))
    facts = [f"levels ({key}): " + " · ".join(f"{name} {fmt_int(n)}" for name, n in ranked[:8])]
    if not errors:
        return facts, None
    shown = errors if len(errors) <= _MAX_ERRORS else errors[:4] + errors[-(_MAX_ERRORS - 4) :]
    lines = number_lines(shown)
    if len(errors) > _MAX_ERRORS:
        lines.insert(4, f"  … {plural(error_count - _MAX_ERRORS, 'more error record')} …")
    title = f"error records ({fmt_int(error_count)}; line| record):"
    return facts, Section(lines, "ends", title, floor=max_chars * 2 // 5)


def json_lines_preview(doc: JsonDoc, length: int, max_chars: int) -> str:
    """The preview of JSON lines parsed by `parse_json` (`doc.records` set); `length` is the raw size."""
    records = doc.records or []
    header = f"JSON lines, {plural(doc.record_count, 'record')}, {plural(length, 'char')}"
    facts: list[str] = []
    if doc.bad_lines:
        shown = ", ".join(str(n) for n in doc.bad_lines[:8]) + (", …" if len(doc.bad_lines) > 8 else "")
        facts.append(f"{plural(len(doc.bad_lines), 'line')} not valid JSON (line {shown})")
    if doc.record_count > len(records) + len(doc.bad_lines):
        facts.append(f"the first {fmt_int(len(records) + len(doc.bad_lines))} records were inspected")
    level_facts, errors = _levels(doc, max_chars)
    facts += level_facts
    # a structured log: its tail matters more than its head
    first, last = (2, 5) if level_facts else (3, 1)
    sections = collection_sections("records", records, max_chars, doc.record_lines, first=first, last=last)
    if errors is not None:
        sections.insert(1 if len(sections) > 1 else 0, errors)
    return assemble(header, facts, sections, max_chars)
