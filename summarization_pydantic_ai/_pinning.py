"""The working-set settings and the pinning API shared by the middleware and the cutting processors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage

from ._sizes import ContextSize
from ._user_messages import check_keep_user_messages, user_messages_budget
from ._windows import DEFAULT_MAX_TOKENS
from ._working_set import DEFAULT_TODO_TOOLS, DEFAULT_WORKING_SET_FRACTION, WorkingSetOptions

__all__ = ["WorkingSetSettings"]


@dataclass(kw_only=True)
class WorkingSetSettings:
    """What every compaction keeps verbatim after the summary (see "The working set"). Keyword-only fields."""

    working_set_tokens: int | None = None
    """Most tokens the working set may add after the summary; default: a quarter of the token budget (of 200,000
    tokens when the budget is unknown). 0 keeps only the latest user request."""
    pin_predicate: Callable[[ModelMessage], bool] | None = None
    """Messages for which this returns True are pinned, like `pin(message_id)`."""
    todo_tool_names: tuple[str, ...] = DEFAULT_TODO_TOOLS
    """Tools whose latest call and result are the current todo list / plan (pydantic_deep's `write_todos`)."""
    keep_errors: int = 1
    """How many of the most recent failed tool exchanges are kept (a failed or retried result)."""
    keep_tool_exchanges: int = 1
    """How many of the most recent tool exchanges (a response with calls and its results) are kept; the in-flight
    exchange, always kept, counts."""
    keep_user_messages: int | bool = False
    """Keep the user's own turns (requests of user prompts) verbatim through every compaction, newest first, up to
    this many tokens of their own (`True`: a tenth of the token budget); a turn that does not fit is summarized."""
    _pins: set[str] = field(default_factory=set[str], repr=False, compare=False)
    """Shared with the per-run copies (`dataclasses.replace` passes the same set), so a pin applies at once."""

    def _check_working_set(self) -> None:
        if self.working_set_tokens is not None and (
            not isinstance(self.working_set_tokens, int) or self.working_set_tokens < 0  # pyright: ignore[reportUnnecessaryIsInstance]
        ):
            raise ValueError(f"working_set_tokens must be an int >= 0 or None, got {self.working_set_tokens!r}")
        for name in ("keep_errors", "keep_tool_exchanges"):
            value: Any = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        check_keep_user_messages(self.keep_user_messages)
        if isinstance(self.todo_tool_names, str):
            raise TypeError("todo_tool_names must be a sequence of tool names, e.g. ('write_todos',), not a string")
        self.todo_tool_names = tuple(self.todo_tool_names)
        if self.pin_predicate is not None and not callable(self.pin_predicate):
            raise TypeError(f"pin_predicate must be a callable (message) -> bool, got {self.pin_predicate!r}")

    def pin(self, message_id: str) -> None:
        """Keep the message with this stable id (`get_message_id(message)`) verbatim through every compaction.

        Raises:
            ValueError: the id is empty, or it is not in this instance's history store (when it has one)."""
        if not isinstance(message_id, str) or not message_id:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"message_id must be a non-empty string, got {message_id!r}")
        problem = self._unknown_message(message_id)
        if problem:
            raise ValueError(problem)
        self._pins.add(message_id)

    def unpin(self, message_id: str) -> None:
        """Stop keeping the message verbatim; unpinning an id that is not pinned does nothing."""
        self._pins.discard(message_id)

    @property
    def pinned(self) -> frozenset[str]:
        """The pinned message ids."""
        return frozenset(self._pins)

    def _unknown_message(self, message_id: str) -> str | None:
        """Why `message_id` cannot be pinned, when that can be told now (overridden where there is a store)."""
        return None

    def _working_set_options(self, budget: int | None, triggers: Sequence[ContextSize] = ()) -> WorkingSetOptions:
        """The options of one compaction. With message triggers, the compacted history keeps room for one more
        exchange (a response and a request) below the smallest, so the working set never makes it compact again
        at the next request."""
        counts = [int(amount) for kind, amount in triggers if kind == "messages"]
        max_messages = min(counts) - 3 if counts else None
        tokens = self.working_set_tokens
        if tokens is None:
            tokens = int(DEFAULT_WORKING_SET_FRACTION * (budget or DEFAULT_MAX_TOKENS))
        return WorkingSetOptions(
            tokens=tokens,
            pins=frozenset(self._pins),
            pin_predicate=self.pin_predicate,
            todo_tools=self.todo_tool_names,
            errors=self.keep_errors,
            tool_exchanges=self.keep_tool_exchanges,
            max_messages=max_messages,
            user_tokens=user_messages_budget(self.keep_user_messages, budget),
        )
