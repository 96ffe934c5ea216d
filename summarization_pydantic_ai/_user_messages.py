"""`keep_user_messages`: the user's own turns kept verbatim through every compaction, newest first, within a
token budget of their own (the working set's other entries keep theirs).

A user turn is a request of user prompts (a system prompt beside them is left where it is): it joins the summary's
request, in history order, before the latest request, so the kept turns are one user turn with the summary. The
summary records which of its parts came from which message (`_merged_pins`), so the next compaction finds the
turns again and keeps them again, while the budget lasts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart, UserPromptPart

from ._merged_pins import preserved_groups
from ._messages import summary_part
from ._windows import DEFAULT_MAX_TOKENS

__all__ = [
    "DEFAULT_USER_MESSAGES_FRACTION",
    "check_keep_user_messages",
    "is_user_turn",
    "user_messages_budget",
    "user_turns",
]

DEFAULT_USER_MESSAGES_FRACTION = 0.1
"""`keep_user_messages=True` keeps user turns up to this fraction of the token budget."""


def check_keep_user_messages(value: Any) -> None:
    """`True` (a tenth of the budget), `False` / `0` (off), or an `int` budget of tokens."""
    if isinstance(value, bool):
        return
    if not isinstance(value, int):
        raise TypeError(f"keep_user_messages must be a bool or an int number of tokens, got {value!r}")
    if value < 0:
        raise ValueError(f"keep_user_messages must be >= 0 tokens, got {value}")


def user_messages_budget(value: int | bool, budget: int | None) -> int:
    """The tokens the kept user turns may take in one compaction."""
    if value is True:
        return int(DEFAULT_USER_MESSAGES_FRACTION * (budget or DEFAULT_MAX_TOKENS))
    return int(value)


def is_user_turn(message: ModelMessage) -> bool:
    """A request of the user's own words: user prompts (and system prompts), nothing else."""
    parts = message.parts
    return (
        isinstance(message, ModelRequest)
        and any(isinstance(p, UserPromptPart) for p in parts)
        and all(isinstance(p, UserPromptPart | SystemPromptPart) for p in parts)
    )


def user_turns(messages: Sequence[ModelMessage], lo: int, hi: int) -> list[tuple[int, int | None, ModelRequest]]:
    """The user turns of `messages[lo:hi]`, newest first: `(index, None, request)` for a request of its own, and
    `(index, n, request)` for the n-th request a summary at `index` absorbed (a turn an earlier compaction kept)."""
    found: list[tuple[int, int | None, ModelRequest]] = []
    for i in range(hi - 1, lo - 1, -1):
        message = messages[i]
        if summary_part(message) is not None:
            groups = preserved_groups(message)
            found += [(i, n, groups[n]) for n in range(len(groups) - 1, -1, -1) if is_user_turn(groups[n])]
        elif isinstance(message, ModelRequest) and is_user_turn(message):
            found.append((i, None, message))
    return found
