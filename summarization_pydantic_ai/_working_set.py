"""The guaranteed working set: what every compaction keeps verbatim right after the summary.

In priority order: the latest user request (never dropped), pinned messages, the current todo list (the latest todo
tool call and its result), recent errors and the last tool exchanges. Entries are taken out of the span the summary
replaces (so they are not summarized twice), whole: a tool call always travels with its results; a token budget
bounds what they add. The system prompt stays where it is, at the start. Layout after the summary: pinned requests
and the latest request in the summary's request (one user turn, the latest request last), then the other pinned
messages, the todo list, errors and exchanges, then the kept tail (docs/concepts/working-set.md).

A pinned request joins the summary's request and loses its own message there; `_merged_pins` records it so the next
compaction finds the pin again by id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ._compaction_plan import CompactionPlan, latest_user_request_at
from ._events import PreservedItem, WorkingSetKind
from ._merged_pins import preserved_groups
from ._messages import get_message_id, summary_part, validate_history
from ._tokens import estimate_message_tokens
from ._user_messages import user_turns

__all__ = [
    "DEFAULT_TODO_TOOLS",
    "DEFAULT_WORKING_SET_FRACTION",
    "WorkingSetOptions",
    "apply_working_set",
    "protected_call_ids",
]

DEFAULT_TODO_TOOLS: tuple[str, ...] = ("write_todos",)
"""The todo tool of `pydantic_deep` (`write_todos` replaces the whole list, so its latest call is the list)."""

DEFAULT_WORKING_SET_FRACTION = 0.25
"""Without `working_set_tokens`, the working set may add up to this fraction of the token budget."""

_ERROR_OUTCOMES = ("failed", "retried")


@dataclass(frozen=True)
class WorkingSetOptions:
    """What one compaction preserves (built by the processors and the middleware from their settings)."""

    tokens: int
    pins: frozenset[str] = frozenset()
    pin_predicate: Callable[[ModelMessage], bool] | None = None
    todo_tools: tuple[str, ...] = DEFAULT_TODO_TOOLS
    errors: int = 1
    tool_exchanges: int = 1
    max_messages: int | None = None
    user_tokens: int = 0
    """`keep_user_messages`: the user turns of the span kept verbatim, newest first, within these tokens."""
    """Errors and tool exchanges are kept only while the compacted history stays at or below this many messages (a
    processor's message trigger, less room for the next exchange), so they never make the next request compact
    again. Pinned messages and the todo list are kept regardless."""


@dataclass
class _Unit:
    """Messages that move together: a message and everything its tool calls and results are paired with."""

    kind: WorkingSetKind
    indices: tuple[int, ...]
    messages: tuple[ModelMessage, ...]
    movable: bool
    group: tuple[int, int] | None = None
    """For a pinned message merged into an earlier summary: (summary index, group number)."""

    @property
    def tokens(self) -> int:
        return sum(map(estimate_message_tokens, self.messages))

    def item(self, moved: bool) -> PreservedItem:
        ids = tuple(mid for mid in map(get_message_id, self.messages) if mid)
        return PreservedItem(self.kind, ids, len(self.messages), self.tokens, moved)


@dataclass
class _Selection:
    messages: Sequence[ModelMessage]
    lo: int
    hi: int
    split_system: bool
    """The plan keeps the first request's system prompt on its own: a moved first request leaves it behind."""
    units: list[_Unit] = field(default_factory=list[_Unit])
    claimed: set[object] = field(default_factory=set[object])
    group_parts: set[int] = field(default_factory=set[int])
    """Every part an earlier summary absorbed from a pinned message: never part of a carried latest request."""

    def unit(self, kind: WorkingSetKind, at: int) -> _Unit | None:
        """The pair-closed unit of `messages[at]`, unless a higher priority claimed it already."""
        indices = _closure(self.messages, at)
        if indices in self.claimed:
            return None
        self.claimed.add(indices)
        inside = [self.lo <= i < self.hi for i in indices]
        movable = all(inside) and _clean(self.messages, indices)
        if any(inside) and not movable:
            return None  # straddles the cut or is broken: left to the summary
        unit = _Unit(kind, indices, tuple(self._verbatim(i) for i in indices), movable)
        self.units.append(unit)
        return unit

    def _verbatim(self, i: int) -> ModelMessage:
        message = self.messages[i]
        if i == 0 and self.split_system and isinstance(message, ModelRequest):
            return replace(message, parts=[p for p in message.parts if not isinstance(p, SystemPromptPart)])
        return message


def _closure(messages: Sequence[ModelMessage], at: int) -> tuple[int, ...]:
    """`at` with the messages it is paired with: a response with tool calls and the requests right after it that
    hold their results. Found locally (O(exchange)); a pair spread further (a broken history) is not a clean unit
    and is left to the summary (see `_clean`)."""
    message = messages[at]
    start = at
    if isinstance(message, ModelRequest):
        if not any(_result_call_id(p) for p in message.parts):
            return (at,)
        while start > 0 and isinstance(messages[start - 1], ModelRequest):
            start -= 1
        start -= 1
        if start < 0:
            return (at,)
    calls = {p.tool_call_id for p in messages[start].parts if isinstance(p, ToolCallPart)}
    if not calls:
        return (at,)
    indices = [start]
    j = start + 1
    while j < len(messages) and isinstance(messages[j], ModelRequest):
        if any(_result_call_id(p) in calls for p in messages[j].parts):
            indices.append(j)
        j += 1
    return tuple(indices) if at in indices else (at,)


def _result_call_id(part: object) -> str | None:
    if isinstance(part, ToolReturnPart):
        return part.tool_call_id
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:  # pyright: ignore[reportDeprecated]
        return part.tool_call_id
    return None


_BEFORE = ModelRequest(parts=[UserPromptPart("before")])
_AFTER = ModelRequest(parts=[UserPromptPart("after")])


def _clean(messages: Sequence[ModelMessage], indices: tuple[int, ...]) -> bool:
    """Whether the unit is valid on its own between two requests, so moving it cannot break the history."""
    if any(summary_part(messages[i]) is not None for i in indices):
        return False  # summaries are rolled into the new summary, not moved
    return not validate_history([_BEFORE, *(messages[i] for i in indices), _AFTER])


def _is_pinned(message: ModelMessage, options: WorkingSetOptions) -> bool:
    if options.pins and get_message_id(message) in options.pins:
        return True
    return options.pin_predicate is not None and bool(options.pin_predicate(message))


def protected_call_ids(messages: Sequence[ModelMessage], options: WorkingSetOptions) -> frozenset[str]:
    """The tool call ids whose results a reduction that edits messages in place (clearing or cutting tool
    results, e.g. the overflow ladder) must leave verbatim: those of pinned messages and of the current todo list."""
    ids: set[str] = set()
    todo_found = False
    for message in reversed(messages):
        if not todo_found and isinstance(message, ModelResponse):
            todo = [
                p.tool_call_id
                for p in message.parts
                if isinstance(p, ToolCallPart) and p.tool_name in options.todo_tools
            ]
            todo_found = bool(todo)
            ids.update(todo)
        if _is_pinned(message, options):
            parts = message.parts
            ids.update(p.tool_call_id for p in parts if isinstance(p, ToolCallPart))
            ids.update(cid for p in parts if (cid := _result_call_id(p)) is not None)
    return frozenset(ids)


def has_tool_error(message: ModelMessage) -> bool:
    if not isinstance(message, ModelRequest):
        return False
    for part in message.parts:
        if isinstance(part, ToolReturnPart) and part.outcome in _ERROR_OUTCOMES:
            return True
        if isinstance(part, RetryPromptPart) and part.tool_name is not None:  # pyright: ignore[reportDeprecated]
            return True
    return False


def _recent(messages: Sequence[ModelMessage], options: WorkingSetOptions) -> tuple[list[int], list[int], list[int]]:
    """One pass from the end: the latest todo call, the most recent errors and tool exchanges (their indices)."""
    todo: list[int] = []
    errors: list[int] = []
    exchanges: list[int] = []
    for i in range(len(messages) - 1, -1, -1):
        if todo and len(errors) >= options.errors and len(exchanges) >= options.tool_exchanges:
            break
        message = messages[i]
        if isinstance(message, ModelResponse):
            names = [p.tool_name for p in message.parts if isinstance(p, ToolCallPart)]
            if names and len(exchanges) < options.tool_exchanges:
                exchanges.append(i)
            if not todo and any(name in options.todo_tools for name in names):
                todo.append(i)
        elif len(errors) < options.errors and has_tool_error(message):
            errors.append(i)
    return todo, errors, exchanges


def _select(messages: Sequence[ModelMessage], plan: CompactionPlan, options: WorkingSetOptions) -> _Selection:
    """Every candidate, in priority order: latest request, pinned (history order), user turns, todo, errors and
    exchanges (newest first); each unit once, under the highest priority that claims it."""
    sel = _Selection(messages, plan.head_end, plan.cutoff, plan.system_head is not None)
    latest = latest_user_request_at(messages)
    if latest is not None and summary_part(messages[latest]) is None:
        sel.unit("latest_request", latest)
    pins = bool(options.pins) or options.pin_predicate is not None
    for i, message in enumerate(messages):
        if summary_part(message) is not None:
            _add_groups(sel, i, message, options)
        elif pins and _is_pinned(message, options):
            sel.unit("pinned", i)
    if options.user_tokens:
        for at, number, turn in user_turns(messages, sel.lo, sel.hi):
            if number is None:
                sel.unit("user_message", at)
            elif not _is_pinned(turn, options):  # a pinned turn was claimed as a pin
                sel.units.append(_Unit("user_message", (at,), (turn,), True, group=(at, number)))
    todo, errors, exchanges = _recent(messages, options)
    for kind, found in (("todo", todo), ("error", errors), ("tool_exchange", exchanges)):
        for i in found:  # an entry a higher priority claimed already counts: it is in the working set
            sel.unit(kind, i)  # type: ignore[arg-type]
    return sel


def _add_groups(sel: _Selection, at: int, summary: ModelMessage, options: WorkingSetOptions) -> None:
    for number, group in enumerate(preserved_groups(summary)):
        sel.group_parts.update(map(id, group.parts))
        if _is_pinned(group, options):
            movable = sel.lo <= at < sel.hi
            sel.units.append(_Unit("pinned", (at,), (group,), movable, group=(at, number)))


def apply_working_set(
    messages: Sequence[ModelMessage], plan: CompactionPlan, options: WorkingSetOptions
) -> CompactionPlan | None:
    """The plan with the working set taken out of its span and listed in `plan.preserved_messages`, in order;
    `None` when the latest request and the pinned messages are all the span holds (nothing left to summarize)."""
    sel = _select(messages, plan, options)
    remaining = options.tokens - sum(map(_part_tokens, plan.carried))
    user_left = options.user_tokens  # user turns have a budget of their own
    room = _message_room(messages, plan, options.max_messages)
    latest_moves = bool(plan.carried) or any(u.kind == "latest_request" and u.movable for u in sel.units)
    taken: list[_Unit] = []
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


def _placement(unit: _Unit) -> tuple[int, tuple[int, ...], tuple[int, int]]:
    """Pinned requests first (they join the summary's user turn), then the latest request with its tool exchange,
    the other pinned messages, the todo list, errors and exchanges; each kind in history order."""
    first = 0 if unit.kind in ("pinned", "user_message") and _joins_summary(unit) else _ORDER[unit.kind]
    return first, unit.indices, unit.group or (0, 0)


def _added_messages(unit: _Unit) -> int:
    return 0 if _joins_summary(unit) else len(unit.messages)


def _joins_summary(unit: _Unit) -> bool:
    """A lone request: placed right after the summary, it is one user turn with it (see `merge_into_summary`)."""
    return len(unit.messages) == 1 and isinstance(unit.messages[0], ModelRequest)


def _has_prompt(unit: _Unit) -> bool:
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
    messages: Sequence[ModelMessage], plan: CompactionPlan, taken: list[_Unit]
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
