"""Pinned requests merged into a summary's request, and found again by id at the next compaction.

pydantic-ai merges consecutive requests (and the middleware builds the merged form itself), so a pinned request
placed right after the summary becomes parts of the summary's request and loses its message-level id. The summary's
metadata records which of its parts came from which message (`preserved_parts`: id, start relative to the
`CompactionPart`, count); part metadata survives pydantic-ai's merge, so the record does too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest

from ._messages import MESSAGE_ID_KEY, get_message_id, summary_info

__all__ = ["PRESERVED_PARTS_KEY", "merge_into_summary", "preserved_groups"]

PRESERVED_PARTS_KEY = "preserved_parts"
"""In a summary's metadata: the parts of its request that are pinned messages merged into it."""


def preserved_groups(message: ModelMessage) -> list[ModelRequest]:
    """The pinned messages a summary request absorbed, rebuilt as requests with their own ids."""
    info = summary_info(message)
    groups: Any = (info or {}).get(PRESERVED_PARTS_KEY)
    if not isinstance(groups, list) or not isinstance(message, ModelRequest):
        return []
    at = next(i for i, p in enumerate(message.parts) if isinstance(p, CompactionPart) and p.provider_name is None)
    rebuilt: list[ModelRequest] = []
    for group in groups:  # pyright: ignore[reportUnknownVariableType]
        start, count, message_id = _group_fields(group)
        if start is None or count is None or at + start + count > len(message.parts):
            continue  # edited by hand or another tool: the parts stay with the summary
        parts = message.parts[at + start : at + start + count]
        metadata = {MESSAGE_ID_KEY: message_id} if message_id else None
        rebuilt.append(ModelRequest(parts=list(parts), metadata=metadata))
    return rebuilt


def _group_fields(group: Any) -> tuple[int | None, int | None, str | None]:
    if not isinstance(group, dict):
        return None, None, None
    start, count, message_id = group.get("start"), group.get("count"), group.get("id")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not (isinstance(start, int) and isinstance(count, int) and start > 0 and count > 0):
        return None, None, None
    return start, count, message_id if isinstance(message_id, str) else None


def merge_into_summary(
    summary: ModelRequest, preserved: Sequence[ModelMessage]
) -> tuple[ModelRequest, list[ModelMessage]]:
    """Put the lone requests that open the working set (pinned requests) into the summary's request, right after
    the summary and before the latest request it carries: one user turn, as pydantic-ai would merge them anyway,
    with the latest request last. The summary's metadata records which parts came from which message, so a pin is
    found again, by id, at the next compaction. Returns the summary request and the rest of the working set."""
    leading: list[ModelRequest] = []
    for message in preserved:
        if not isinstance(message, ModelRequest):
            break
        leading.append(message)
    info = summary_info(summary)
    if not leading or info is None:
        return summary, list(preserved)
    at = next(i for i, p in enumerate(summary.parts) if isinstance(p, CompactionPart) and p.provider_name is None)
    groups: list[dict[str, Any]] = []
    start = 1
    for message in leading:
        groups.append({"id": get_message_id(message), "start": start, "count": len(message.parts)})
        start += len(message.parts)
    info[PRESERVED_PARTS_KEY] = groups
    parts = [*summary.parts[: at + 1], *(p for m in leading for p in m.parts), *summary.parts[at + 1 :]]
    return replace(summary, parts=parts), list(preserved[len(leading) :])
