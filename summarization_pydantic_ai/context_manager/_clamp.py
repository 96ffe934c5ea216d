"""Clamp one oversized part: a runaway response text, giant tool-call arguments, a huge tool return or a user
prompt larger than the window is cut to its head and tail, with a marker that names where the original is kept.

Only the part's content changes: every part stays where it is, with its kind and its tool call id, so a clamp is
pair-safe and valid for every provider (arguments stay a JSON object, or a JSON string when they were one). The
message records which of its parts were clamped (`CLAMPED_METADATA_KEY`), so the recording does not take the
clamped copy for a new version of the message: the store keeps the original, and reading the message back by its
id returns it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias, cast

from pydantic_ai.messages import (
    ModelMessage,
    RetryFeedbackPart,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from .._events import ClampedPart, EventCallback, PartsClamped, emit_event
from .._messages import get_message_id
from .._render import iter_media, part_text
from .._sizes import ContextSize, validate_context_size
from .._tokens import estimate_text_tokens
from .._windows import DEFAULT_MAX_TOKENS
from ._clamp_content import MIN_CUT_TOKENS, clamp_part

__all__ = [
    "CLAMPED_METADATA_KEY",
    "PART_KINDS",
    "ClampingMixin",
    "NewMessages",
    "PartKind",
    "check_clamp_settings",
    "clamp_message",
    "clamp_messages",
    "clamp_new_parts",
    "clamp_sizes",
    "clampable_tokens",
    "clamped_part_indices",
    "original_pointer",
    "part_kind",
]

CLAMPED_METADATA_KEY = "summarization_pydantic_ai.clamped"
"""In a message's metadata: the parts cut to head and tail, `[{"part": index, "kind": ..., "tokens": before}]`."""

PartKind: TypeAlias = Literal["text", "tool_call_args", "tool_return", "user_prompt", "retry_prompt"]
PART_KINDS: tuple[PartKind, ...] = ("text", "tool_call_args", "tool_return", "user_prompt", "retry_prompt")


def original_pointer(message_id: str | None, *, history_tool: bool = False) -> str:
    """The end of a clamp's marker: where the original is kept."""
    if message_id is None:
        return "; the original was not stored"
    pointer = f"; the original is message {message_id} in the history store"
    if history_tool:
        pointer += f': read_history(start_id="{message_id}", end_id="{message_id}")'
    return pointer


def part_kind(part: Any) -> PartKind | None:
    """The kind of a part a clamp may cut; `None` for the others (system prompts, summaries, thinking with its
    signature, provider-executed tools, media, framework-typed tool parts, which are validated on reload)."""
    if type(part) is TextPart:
        return "text"
    if type(part) is ToolCallPart:
        return "tool_call_args"
    if type(part) is ToolReturnPart:
        return None if any(iter_media(part.content)) else "tool_return"
    if isinstance(part, UserPromptPart):
        return "user_prompt"
    if isinstance(part, RetryPromptPart | RetryFeedbackPart) and isinstance(part.content, str):  # pyright: ignore[reportDeprecated]
        return "retry_prompt"
    return None


def clampable_tokens(part: Any) -> int:
    """The estimated tokens of the part's text (0 for a part a clamp leaves alone)."""
    return estimate_text_tokens(part_text(part)) if part_kind(part) is not None else 0


def clamped_part_indices(message: ModelMessage) -> frozenset[int]:
    """The parts of `message` a clamp cut (from its metadata)."""
    entries: Any = (message.metadata or {}).get(CLAMPED_METADATA_KEY)
    if not isinstance(entries, list):
        return frozenset()
    parts = (cast(dict[str, Any], e).get("part") for e in cast(list[Any], entries) if isinstance(e, dict))
    return frozenset(p for p in parts if isinstance(p, int))


def clamp_message(
    message: ModelMessage,
    limit: int,
    keep: int,
    *,
    kinds: Sequence[PartKind] = PART_KINDS,
    pointer: Callable[[str | None], str] = original_pointer,
    message_index: int = 0,
) -> tuple[ModelMessage, list[ClampedPart]]:
    """`message` with every part of `kinds` above `limit` tokens cut to about `keep` tokens (head and tail); the
    message itself when no part is over."""
    done = clamped_part_indices(message)  # a part is cut once: its marker already says where the original is
    oversized = [(j, part) for j, part in enumerate(message.parts) if j not in done and part_kind(part) in kinds]
    oversized = [(j, part, tokens) for j, part in oversized if (tokens := clampable_tokens(part)) > limit]
    if not oversized:
        return message, []
    message_id = get_message_id(message)
    note = pointer(message_id)
    parts: list[Any] = list(message.parts)
    clamped: list[ClampedPart] = []
    for j, part, tokens in oversized:
        cut = clamp_part(part, max(keep, MIN_CUT_TOKENS), note)
        after = clampable_tokens(cut)
        if after >= tokens:
            continue  # nothing could be cut (e.g. many short text items): the part stays as it was
        parts[j] = cut
        clamped.append(ClampedPart(message_index, j, str(part_kind(part)), tokens, after, message_id))
    if not clamped:
        return message, []
    entries: list[Any] = list((message.metadata or {}).get(CLAMPED_METADATA_KEY) or [])
    entries += [{"part": c.part_index, "kind": c.kind, "tokens": c.tokens_before} for c in clamped]
    metadata = {**(message.metadata or {}), CLAMPED_METADATA_KEY: entries}
    return replace(message, parts=parts, metadata=metadata), clamped  # type: ignore[arg-type]


def clamp_messages(
    messages: Sequence[ModelMessage],
    limit: int,
    keep: int,
    *,
    indices: Sequence[int] | None = None,
    kinds: Sequence[PartKind] = PART_KINDS,
    pointer: Callable[[str | None], str] = original_pointer,
) -> tuple[list[ModelMessage], list[ClampedPart]]:
    """Clamp the messages at `indices` (default: all). Returns `messages` itself (as a list) when none changed."""
    result: list[ModelMessage] | None = None
    clamped: list[ClampedPart] = []
    for i in range(len(messages)) if indices is None else indices:
        new, cut = clamp_message(messages[i], limit, keep, kinds=kinds, pointer=pointer, message_index=i)
        if cut:
            result = result if result is not None else list(messages)
            result[i] = new
            clamped += cut
    if result is None:
        return messages if isinstance(messages, list) else list(messages), []
    return result, clamped


def check_clamp_settings(max_part_tokens: Any, clamp_to_tokens: Any) -> ContextSize | None:
    """Validate `max_part_tokens` (`None`, an `int` of tokens, `("tokens", n)` or `("fraction", f)` of the budget)
    and `clamp_to_tokens` (`None` or an `int` below the limit); returns the limit as a `ContextSize`."""
    if max_part_tokens is None:
        limit = None
    elif isinstance(max_part_tokens, int) and not isinstance(max_part_tokens, bool):
        limit = validate_context_size(("tokens", max_part_tokens), name="max_part_tokens")
    else:
        limit = validate_context_size(max_part_tokens, name="max_part_tokens")
        if limit[0] == "messages":
            raise ValueError("max_part_tokens: a part's limit is in tokens: an int, ('tokens', n) or ('fraction', f)")
    if limit is not None and limit[0] == "tokens" and limit[1] <= MIN_CUT_TOKENS:
        raise ValueError(f"max_part_tokens must be more than {MIN_CUT_TOKENS} tokens, got {limit[1]}")
    if clamp_to_tokens is not None:
        if isinstance(clamp_to_tokens, bool) or not isinstance(clamp_to_tokens, int):
            raise TypeError(f"clamp_to_tokens must be an int number of tokens or None, got {clamp_to_tokens!r}")
        if clamp_to_tokens < MIN_CUT_TOKENS:
            raise ValueError(
                f"clamp_to_tokens must be at least {MIN_CUT_TOKENS} (the marker's room), got {clamp_to_tokens}"
            )
        if limit is not None and limit[0] == "tokens" and clamp_to_tokens >= limit[1]:
            raise ValueError(f"clamp_to_tokens ({clamp_to_tokens}) must be smaller than max_part_tokens ({limit[1]})")
    return limit


def clamp_sizes(limit: ContextSize, clamp_to_tokens: int | None, budget: int | None) -> tuple[int, int]:
    """The limit in tokens (a fraction of `budget`) and what a clamped part keeps: `clamp_to_tokens`, by default a
    tenth of the limit (at least 128 tokens), never above the limit."""
    tokens = int(limit[1]) if limit[0] == "tokens" else max(int(limit[1] * (budget or DEFAULT_MAX_TOKENS)), 1)
    keep = clamp_to_tokens if clamp_to_tokens is not None else max(tokens // 10, 2 * MIN_CUT_TOKENS)
    return tokens, max(min(keep, tokens - 1), 1)


@dataclass
class NewMessages:
    """Where the messages a clamp has not looked at start: after the ones it saw at its previous call (checked by
    identity of the last one), else from the start (a rewritten history). O(new messages) per call."""

    seen: int = 0
    last: ModelMessage | None = None

    def start(self, messages: Sequence[ModelMessage]) -> int:
        k = self.seen
        return k if 0 < k <= len(messages) and messages[k - 1] is self.last else 0

    def saw(self, messages: Sequence[ModelMessage]) -> None:
        self.seen, self.last = len(messages), (messages[-1] if messages else None)


async def clamp_new_parts(
    messages: list[ModelMessage],
    tracker: NewMessages,
    limit: int,
    keep: int,
    *,
    processor: str,
    event_callback: EventCallback | None,
    kinds: Sequence[PartKind] = PART_KINDS,
    history_tool: bool = False,
) -> list[ModelMessage]:
    """Clamp the oversized parts of the messages `tracker` has not seen: each part once, as it enters the history,
    so the cached prefix of later requests is never rewritten. Reports a `PartsClamped` event."""
    start = tracker.start(messages)
    result, clamped = clamp_messages(
        messages,
        limit,
        keep,
        indices=range(start, len(messages)),
        kinds=kinds,
        pointer=lambda message_id: original_pointer(message_id, history_tool=history_tool),
    )
    tracker.saw(result)
    if clamped:
        await emit_event(event_callback, PartsClamped(processor, tuple(clamped)))
    return result


class ClampingMixin:
    """The middleware's `max_part_tokens` step (the fields it reads are the middleware's): after the new messages
    are recorded (the store keeps the originals), their oversized parts are clamped in the working history."""

    clamp_to_tokens: int | None
    expose_history_tool: bool
    event_callback: EventCallback | None
    _part_limit: ContextSize | None

    async def _clamp_new(
        self, messages: list[ModelMessage], tracker: NewMessages, budget: int, stored: bool
    ) -> list[ModelMessage]:
        if self._part_limit is None:
            return messages
        limit, keep = clamp_sizes(self._part_limit, self.clamp_to_tokens, budget)
        return await clamp_new_parts(
            messages,
            tracker,
            limit,
            keep,
            processor="ContextManagerMiddleware",
            event_callback=self.event_callback,
            history_tool=self.expose_history_tool and stored,
        )
