"""The guaranteed working set: what every compaction keeps verbatim right after the summary.

In priority order: the latest user request (never dropped), pinned messages, the current todo list (the latest todo
tool call and its result), recent errors and the last tool exchanges. Entries are taken out of the span the summary
replaces (so they are not summarized twice), whole: a tool call always travels with its results; a token budget
bounds what they add. The system prompt stays where it is, at the start (docs/concepts/working-set.md).

A pinned request joins the summary's request and loses its own message there; `_merged_pins` records it so the next
compaction finds the pin again by id.

This module holds the options and finds the candidates (pair-closed units, in priority order);
`_working_set_plan.py` takes them out of a plan and lays them out after the summary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

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
    "Selection",
    "Unit",
    "WorkingSetOptions",
    "has_tool_error",
    "protected_call_ids",
    "select_units",
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
class Unit:
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
class Selection:
    messages: Sequence[ModelMessage]
    lo: int
    hi: int
    split_system: bool
    """The plan keeps the first request's system prompt on its own: a moved first request leaves it behind."""
    units: list[Unit] = field(default_factory=list[Unit])
    claimed: set[object] = field(default_factory=set[object])
    group_parts: set[int] = field(default_factory=set[int])
    """Every part an earlier summary absorbed from a pinned message: never part of a carried latest request."""

    def unit(self, kind: WorkingSetKind, at: int) -> Unit | None:
        """The pair-closed unit of `messages[at]`, unless a higher priority claimed it already."""
        indices = _closure(self.messages, at)
        if indices in self.claimed:
            return None
        self.claimed.add(indices)
        inside = [self.lo <= i < self.hi for i in indices]
        movable = all(inside) and _clean(self.messages, indices)
        if any(inside) and not movable:
            return None  # straddles the cut or is broken: left to the summary
        unit = Unit(kind, indices, tuple(self._verbatim(i) for i in indices), movable)
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


def select_units(messages: Sequence[ModelMessage], plan: CompactionPlan, options: WorkingSetOptions) -> Selection:
    """Every candidate, in priority order: latest request, pinned (history order), user turns, todo, errors and
    exchanges (newest first); each unit once, under the highest priority that claims it."""
    sel = Selection(messages, plan.head_end, plan.cutoff, plan.system_head is not None)
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
                sel.units.append(Unit("user_message", (at,), (turn,), True, group=(at, number)))
    todo, errors, exchanges = _recent(messages, options)
    for kind, found in (("todo", todo), ("error", errors), ("tool_exchange", exchanges)):
        for i in found:  # an entry a higher priority claimed already counts: it is in the working set
            sel.unit(kind, i)  # type: ignore[arg-type]
    return sel


def _add_groups(sel: Selection, at: int, summary: ModelMessage, options: WorkingSetOptions) -> None:
    for number, group in enumerate(preserved_groups(summary)):
        sel.group_parts.update(map(id, group.parts))
        if _is_pinned(group, options):
            movable = sel.lo <= at < sel.hi
            sel.units.append(Unit("pinned", (at,), (group,), movable, group=(at, number)))
