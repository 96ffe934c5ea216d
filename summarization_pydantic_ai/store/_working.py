"""The working context of a recorded history: which records `load()` returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage

from .._messages import get_message_id, summary_info
from ._framing import Record, clean_summary

__all__ = ["working_context", "working_head", "working_records"]


def working_context(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """The working context of a recorded history: what `HistoryStore.load()` returns for a file holding exactly
    `messages` (in recorded order, summaries included, as `load_all()` or `read()` return them).

    Applied to the records up to a message id, it is the history as the agent had it at that point: the original
    messages when no compaction happened before it, else the latest summary with what it kept, and what followed.
    """
    records: list[Record] = []
    positions: dict[str, int] = {}
    for i, message in enumerate(messages):
        info = summary_info(message)
        key = get_message_id(message) or f"#{i}"  # a message without an id is its own record
        record = Record(i, 0, key, clean_summary(info) if info else None, 0)  # offset: the index in `messages`
        if key in positions:
            records[positions[key]] = record  # a newer version, in the place of the first one
        else:
            positions[key] = len(records)
            records.append(record)
    return [messages[r.offset] for r in working_records(records, positions)]


def working_records(records: Sequence[Record], positions: Mapping[str, int]) -> list[Record]:
    """The latest summary, what it kept around it, and everything recorded after it (`records`: one per message,
    its latest version, in the order of first recording; `positions`: message id -> index)."""
    latest, head = working_head(records, positions)
    if latest is None:
        return list(records)
    return [*head, *(r for r in records[latest + 1 :] if not r.summary)]


def working_head(records: Sequence[Record], positions: Mapping[str, int]) -> tuple[int | None, list[Record]]:
    """The index of the latest summary (`None`: no summary, every record is working), and the working records
    up to it: the summary with what it kept around it. What follows them in the working context is every record
    after the summary that is not a summary itself."""
    latest = next((i for i in range(len(records) - 1, -1, -1) if records[i].summary), None)
    if latest is None:
        return None, []
    info = records[latest].summary or {}
    if "working_before" in info or "working_after" in info:
        before = [records[positions[i]] for i in info.get("working_before", []) if i in positions]
        after = [records[positions[i]] for i in info.get("working_after", []) if i in positions]
        return latest, [*before, records[latest], *after]
    # A summary written by a plain processor: everything before it that it (transitively) did not cover.
    covered = _covered(info, records, positions, set())
    kept = [i for i in range(latest) if not records[i].summary and records[i].message_id not in covered]
    first_covered = next((i for i in range(latest) if records[i].message_id in covered), latest)
    head = [records[i] for i in kept if i < first_covered]
    tail = [records[i] for i in kept if i >= first_covered]
    return latest, [*head, records[latest], *tail]


def _covered(info: dict[str, Any], records: Sequence[Record], positions: Mapping[str, int], seen: set[str]) -> set[str]:
    covered: set[str] = set(info.get("covers", []))
    for summary_id in info.get("replaces_summaries", []):
        position = positions.get(summary_id)
        if position is not None and summary_id not in seen and records[position].summary:
            seen.add(summary_id)
            covered |= _covered(records[position].summary or {}, records, positions, seen)
    return covered
