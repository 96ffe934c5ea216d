"""The ladder's in-place steps: clear old tool results, cut the largest tool returns, clamp oversized parts.

Each edits parts where they are (no message is added, removed or moved) and returns the input list itself when it
changes nothing; the `Ladder` keeps a step only when it shrinks the history and adds no problem to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart

from .._compaction_plan import latest_user_request_at
from .._cutoff import unanswered_start
from .._messages import get_message_id
from .._render import iter_media, part_text
from .._tokens import estimate_text_tokens
from ..processors._clear_tool_results import CLEARED_METADATA_KEY, ClearToolResultsProcessor
from ._clamp import (
    PartKind,
    clamp_message,
    clamp_messages,
    clampable_tokens,
    original_pointer,
    part_kind,
)
from ._clamp_content import water_level
from ._truncate import TRUNCATED_METADATA_KEY, truncate_output

__all__ = ["clamp_latest_request", "clamp_oversized_parts", "clear_old_tool_results", "truncate_tool_returns"]

_PLACEHOLDER_TOKENS = 40
"""About what `ClearToolResultsProcessor`'s placeholder costs: what clearing a result does not reclaim."""
_MIN_RETURN_TOKENS = 200
"""A tool return is never cut below this: its head and tail still say what it was."""
_OVERSIZED_SHARE = 4
"""A part over a quarter of the retry's target is oversized: the clamp step may cut it."""
_CLAMPED_KINDS: tuple[PartKind, ...] = ("text", "tool_call_args", "user_prompt", "retry_prompt")


def _tool_returns(messages: list[ModelMessage]) -> list[tuple[int, int, ToolReturnPart]]:
    return [
        (i, j, part)
        for i, message in enumerate(messages)
        if isinstance(message, ModelRequest)
        for j, part in enumerate(message.parts)
        if isinstance(part, ToolReturnPart)
    ]


def _metadata(part: ToolReturnPart) -> dict[str, Any]:
    metadata: Any = part.metadata
    return dict(metadata) if isinstance(metadata, dict) else {}  # pyright: ignore[reportUnknownArgumentType]


async def clear_old_tool_results(messages: list[ModelMessage], excess: int) -> list[ModelMessage]:
    """Clear the oldest tool results (never those the model has not answered yet) until about `excess` tokens are
    reclaimed."""
    returns = _tool_returns(messages)
    inflight = unanswered_start(messages)
    reclaim, clear = 0, 0
    for k, (i, _, part) in enumerate(returns):
        if i >= inflight or reclaim >= excess:
            break
        if CLEARED_METADATA_KEY not in _metadata(part):
            reclaim += estimate_text_tokens(part_text(part)) - _PLACEHOLDER_TOKENS
            clear = k + 1
    if clear == 0:
        return messages
    return await ClearToolResultsProcessor(keep_last=len(returns) - clear, clear_at_least=0)(messages)


def truncate_tool_returns(messages: list[ModelMessage], excess: int) -> list[ModelMessage]:
    """Cut the largest text tool returns (the in-flight ones too) to their head and tail lines, all to one cap
    chosen to reclaim about `excess` tokens. Media and cleared results are left alone."""
    candidates = [
        (i, j, part, estimate_text_tokens(part_text(part)))
        for i, j, part in _tool_returns(messages)
        if CLEARED_METADATA_KEY not in _metadata(part) and not any(iter_media(part.content))
    ]
    cap = water_level([tokens for *_, tokens in candidates], excess, floor=_MIN_RETURN_TOKENS)
    result, changed = list(messages), False
    for i, j, part, tokens in candidates:
        pointer = original_pointer(get_message_id(result[i]))
        content, cut = truncate_output(part.content, cap, pointer=pointer) if tokens > cap else (None, None)
        if cut is None:
            continue
        changed = True
        original = _metadata(part).get(TRUNCATED_METADATA_KEY) or {"tokens": tokens}
        message = result[i]
        assert isinstance(message, ModelRequest)
        parts = list(message.parts)
        parts[j] = replace(part, content=content, metadata={**_metadata(part), TRUNCATED_METADATA_KEY: original})
        result[i] = replace(message, parts=parts)
    return result if changed else messages


def clamp_oversized_parts(
    messages: list[ModelMessage], excess: int, target: int, *, history_tool: bool = False
) -> list[ModelMessage]:
    """Cut the parts no other step reaches (response texts, tool-call arguments, user prompts, retry prompts, the
    in-flight ones too) that take more than a quarter of `target` each, all to one cap chosen to reclaim about
    `excess` tokens (never below 200): the marker names the message whose original the store keeps. The latest
    user request is left to `clamp_latest_request`, the last step."""
    latest = latest_user_request_at(messages)
    oversized = target // _OVERSIZED_SHARE

    def candidate(i: int, part: object) -> bool:
        return part_kind(part) in _CLAMPED_KINDS and not (i == latest and isinstance(part, UserPromptPart))

    sizes = [
        tokens
        for i, message in enumerate(messages)
        for part in message.parts
        if candidate(i, part) and (tokens := clampable_tokens(part)) > oversized
    ]
    if not sizes:
        return messages
    cap = water_level(sizes, excess, floor=_MIN_RETURN_TOKENS)
    pointer = _pointer(history_tool)
    others = [i for i in range(len(messages)) if i != latest]
    result = clamp_messages(messages, oversized, cap, indices=others, kinds=_CLAMPED_KINDS, pointer=pointer)[0]
    if latest is None:
        return result
    message = clamp_message(result[latest], oversized, cap, kinds=("retry_prompt",), pointer=pointer)[0]
    return _with(result, latest, message, messages)


def clamp_latest_request(
    messages: list[ModelMessage], excess: int, limit: int, *, history_tool: bool = False
) -> list[ModelMessage]:
    """The last resort, when even a slid window is too long: cut the text of the latest user request when it alone
    is larger than `limit` (a prompt larger than the window could never be sent whole), to one cap chosen to
    reclaim about `excess` tokens; its media stay."""
    latest = latest_user_request_at(messages)
    if latest is None:
        return messages
    sizes = [clampable_tokens(p) for p in messages[latest].parts if isinstance(p, UserPromptPart)]
    if sum(sizes) <= limit:
        return messages
    cap = water_level(sizes, excess, floor=_MIN_RETURN_TOKENS)
    message = clamp_message(messages[latest], cap, cap, kinds=("user_prompt",), pointer=_pointer(history_tool))[0]
    return _with(messages, latest, message, messages)


def _pointer(history_tool: bool) -> Callable[[str | None], str]:
    return lambda message_id: original_pointer(message_id, history_tool=history_tool)


def _with(
    result: list[ModelMessage], i: int, message: ModelMessage, original: list[ModelMessage]
) -> list[ModelMessage]:
    """`result` with `message` at `i` (a copy, never `original` edited); `original` when nothing changed."""
    if message is result[i]:
        return result
    result = list(result) if result is original else result
    result[i] = message
    return result
