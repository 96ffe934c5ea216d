"""Taking the working set out of a compaction plan (`apply_working_set`): each candidate unit (`_working_set.py`)
moves within its token budget and the message room, is placed right after the summary, and leaves the span.

Layout after the summary: pinned requests and the latest request in the summary's request (one user turn, the
latest request last), then the other pinned messages, the todo list, errors and exchanges, then the kept tail
(docs/concepts/working-set.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from ._compaction_plan import CompactionPlan
from ._events import PreservedItem
from ._tokens import estimate_message_tokens
from ._working_set import Unit, WorkingSetOptions, select_units

__all__ = ["apply_working_set"]


def apply_working_set(
    messages: Sequence[ModelMessage], plan: CompactionPlan, options: WorkingSetOptions
) -> CompactionPlan | None:
    """The plan with the working set taken out of its span and listed in `plan.preserved_messages`, in order;
    `None` when the latest request and the pinned messages are all the span holds (nothing left to summarize)."""
    sel = select_units(messages, plan, options)
    remaining = options.tokens - sum(map(_part_tokens, plan.carried))
    user_left = options.user_tokens  # user turns have a budget of their own
    room = _message_room(messages, plan, options.max_messages)
    latest_moves = bool(plan.carried) or any(u.kind == "latest_request" and u.movable for u in sel.units)
    taken: list[Unit] = []
    items: list[PreservedItem] = []
    dropped: list[PreservedItem] = []
    for unit in sel.units:
        if not unit.movable:
            items.append(unit.item(moved=False))
        elif unit.kind == "latest_request" and len(unit.indices) == 1:
            items.append(unit.item(moved=True))  # carried by the summary request (plan.carried)
        elif unit.kind == "latest_request" or (
            unit.tokens <= (user_left if unit.kind == "user_message" else remaining)
            and (unit.kind in ("pinned", "todo", "user_message") or _added_messages(unit) <= room)
            and not (latest_moves and not _joins_summary(unit) and _has_prompt(unit))
        ):
            if unit.kind == "user_message":
                user_left -= unit.tokens
            else:
                remaining -= unit.tokens
            room -= _added_messages(unit)
            taken.append(unit)
            items.append(unit.item(moved=True))
        else:
            dropped.append(unit.item(moved=False))
    if plan.carried and not any(u.kind == "latest_request" for u in sel.units):
        # carried from an earlier summary's request, where it was carried before
        tokens = sum(map(_part_tokens, plan.carried))
        items.insert(0, PreservedItem("latest_request", (), 1, tokens, moved=True))
    span = _span_without(messages, plan, taken)
    while not span and taken and taken[-1].kind not in ("latest_request", "pinned"):
        # The working set would be the whole span: give the newest-claimed, lowest-priority entries to the summary,
        # so the compaction still shrinks the context.
        unit = taken.pop()
        items.remove(unit.item(moved=True))
        dropped.append(unit.item(moved=False))
        span = _span_without(messages, plan, taken)
    if not span:
        return None
    taken.sort(key=_placement)
    preserved = tuple(m for u in taken for m in u.messages)
    carried = plan.carried
    if any(u.kind == "latest_request" for u in taken):
        carried = ()  # the latest request moved with its tool exchange
    carried = tuple(p for p in carried if id(p) not in sel.group_parts)
    return replace(
        plan,
        span=span,
        carried=carried,
        preserved_messages=preserved,
        preserved=tuple(items),
        preserved_dropped=tuple(dropped),
    )


_ORDER = {"latest_request": 1, "pinned": 2, "user_message": 3, "todo": 4, "error": 5, "tool_exchange": 6}


def _placement(unit: Unit) -> tuple[int, tuple[int, ...], tuple[int, int]]:
    """Pinned requests first (they join the summary's user turn), then the latest request with its tool exchange,
    the other pinned messages, the todo list, errors and exchanges; each kind in history order."""
    first = 0 if unit.kind in ("pinned", "user_message") and _joins_summary(unit) else _ORDER[unit.kind]
    return first, unit.indices, unit.group or (0, 0)


def _added_messages(unit: Unit) -> int:
    return 0 if _joins_summary(unit) else len(unit.messages)


def _joins_summary(unit: Unit) -> bool:
    """A lone request: placed right after the summary, it is one user turn with it (see `merge_into_summary`)."""
    return len(unit.messages) == 1 and isinstance(unit.messages[0], ModelRequest)


def _has_prompt(unit: Unit) -> bool:
    """Whether the unit holds a user prompt: moved after the latest request, it would look like a later one."""
    return any(isinstance(p, UserPromptPart) for m in unit.messages if isinstance(m, ModelRequest) for p in m.parts)


def _message_room(messages: Sequence[ModelMessage], plan: CompactionPlan, max_messages: int | None) -> int:
    if max_messages is None:
        return len(messages)
    kept = plan.head_end + (plan.system_head is not None) + 1 + len(messages) - plan.cutoff
    return max_messages - kept


def _part_tokens(part: Any) -> int:
    return estimate_message_tokens(ModelRequest(parts=[part]))


def _span_without(
    messages: Sequence[ModelMessage], plan: CompactionPlan, taken: list[Unit]
) -> tuple[ModelMessage, ...]:
    moved_messages = {id(messages[i]) for u in taken if u.group is None for i in u.indices}
    moved_parts = {id(p) for u in taken if u.group is not None for p in u.messages[0].parts}
    return _without(plan.span, moved_messages, moved_parts)


def _without(span: Sequence[ModelMessage], moved_messages: set[int], moved_parts: set[int]) -> tuple[ModelMessage, ...]:
    kept: list[ModelMessage] = []
    for message in span:
        if id(message) in moved_messages:
            continue
        if not moved_parts:
            kept.append(message)
            continue
        parts = [p for p in message.parts if id(p) not in moved_parts]
        if len(parts) == len(message.parts):
            kept.append(message)
        elif parts:
            kept.append(replace(message, parts=parts))  # type: ignore[arg-type]
    return tuple(kept)
