"""Per-message token estimates: about four characters per token, media at fixed estimates.

`estimate_message_tokens` is the reference; `approx_message_tokens` computes the same numbers faster for the
common part kinds (the length of their text; dict tool results measured without serializing them), and
`approx_messages_tokens` for a whole history in one loop, for counting a long history the first time. Tool-call
arguments are counted as pydantic-ai sends them to the model: compact JSON from `pydantic_core.to_json`.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CompactionPart,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    NativeToolCallPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    VideoUrl,
)
from pydantic_core import PydanticSerializationError, to_json

from ._render import iter_media, part_text

__all__ = [
    "AUDIO_TOKENS",
    "CHARS_PER_TOKEN",
    "DOCUMENT_TOKENS",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "PART_OVERHEAD_TOKENS",
    "VIDEO_TOKENS",
    "approx_message_tokens",
    "approx_messages_tokens",
    "estimate_message_tokens",
    "estimate_text_tokens",
]

CHARS_PER_TOKEN = 4
"""The approximate counter's ratio: about four characters of English or JSON per token."""
MESSAGE_OVERHEAD_TOKENS = 4
PART_OVERHEAD_TOKENS = 3
IMAGE_TOKENS = 1_000
"""Fixed estimate for an image (OpenAI bills ~765 for 1024x1024, Anthropic up to ~1,600)."""
AUDIO_TOKENS = 1_500
DOCUMENT_TOKENS = 2_500
VIDEO_TOKENS = 5_000


def estimate_text_tokens(text: str) -> int:
    """Approximate tokens of a string: characters / 4, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def _media_tokens(item: object) -> int:
    if isinstance(item, ImageUrl):
        return IMAGE_TOKENS
    if isinstance(item, AudioUrl):
        return AUDIO_TOKENS
    if isinstance(item, VideoUrl):
        return VIDEO_TOKENS
    if isinstance(item, DocumentUrl):
        return DOCUMENT_TOKENS
    if isinstance(item, BinaryContent):
        if item.is_image:
            return IMAGE_TOKENS
        if item.is_audio:
            return AUDIO_TOKENS
        if item.is_video:
            return VIDEO_TOKENS
        return DOCUMENT_TOKENS
    return DOCUMENT_TOKENS  # uploaded files: a document-sized guess


def _args_length(args: Any) -> int | None:
    """The length of tool-call arguments as pydantic-ai sends them to a model (compact JSON from
    `pydantic_core.to_json`, in characters), serialized in C; `None` for arguments it cannot serialize."""
    try:
        raw = to_json(args)
    except (PydanticSerializationError, ValueError):
        return None
    return len(raw) if raw.isascii() else len(raw.decode(errors="surrogateescape"))


def _counted_text(part: Any) -> str:
    """The text a part is counted by: its readable text, with tool-call arguments as pydantic-ai sends them."""
    if isinstance(part, ToolCallPart | NativeToolCallPart) and not isinstance(part.args, str) and part.args:
        with contextlib.suppress(PydanticSerializationError, ValueError):
            return to_json(part.args).decode(errors="surrogateescape")
    return part_text(part)


def _estimate_part_tokens(part: Any, text_tokens: Callable[[str], int]) -> int:
    content = getattr(part, "content", None)
    media = list(iter_media(content)) if content is not None and not isinstance(content, str) else []
    text = _counted_text(part)
    if media:
        # Media are counted at their fixed estimate, not by the length of their description.
        text = "\n".join(line for line in text.split("\n") if not line.startswith("["))
    name = getattr(part, "tool_name", None)
    name_tokens = text_tokens(name) if isinstance(name, str) else 0
    return PART_OVERHEAD_TOKENS + text_tokens(text) + name_tokens + sum(_media_tokens(m) for m in media)


def estimate_message_tokens(message: ModelMessage, text_tokens: Callable[[str], int] = estimate_text_tokens) -> int:
    """Estimate one message: every part kind (system, user text and media, tool calls and returns including
    dict/list content, thinking, summaries, files) plus the request's rendered instructions."""
    total = MESSAGE_OVERHEAD_TOKENS + sum(_estimate_part_tokens(p, text_tokens) for p in message.parts)
    if isinstance(message, ModelRequest) and message.instructions:
        total += text_tokens(message.instructions)
    return total


def _str_json_length(text: str) -> int:
    if '"' in text or "\\" in text or not text.isprintable():
        return len(json.dumps(text, ensure_ascii=False))  # escapes (or an unusual character): exactly
    return len(text) + 2


_BIG_INT = 10**18
_KEY_LENGTHS: dict[object, int] = {}
"""JSON lengths of argument names seen (tool arguments reuse a few names); bounded by `_MAX_KEYS`."""
_MAX_KEYS = 4_096


def _json_length(value: Any) -> int | None:
    """The length of `_json(value)` (compact JSON) for plain data, computed without serializing; `None` when
    unsure (the caller serializes then). Dicts with plain string and integer values, the usual tool arguments,
    take the inlined path."""
    kind = value.__class__
    if kind is dict:
        items: dict[Any, Any] = value
        if not items:
            return 2
        total = 2 * len(items) + 1  # braces, a colon per item, the commas between items
        key_lengths = _KEY_LENGTHS
        for key, item in items.items():
            key_length = key_lengths.get(key)
            if key_length is None:
                if key.__class__ is not str:
                    return None
                key_length = _str_json_length(key)
                if len(key_lengths) < _MAX_KEYS:
                    key_lengths[key] = key_length
            total += key_length
            item_kind = item.__class__
            if item_kind is str:
                if '"' in item or "\\" in item or not item.isprintable():
                    total += len(json.dumps(item, ensure_ascii=False))
                else:
                    total += len(item) + 2
            elif item_kind is int and -_BIG_INT < item < _BIG_INT:
                total += len(str(item))
            else:
                length = _json_length(item)
                if length is None:
                    return None
                total += length
        return total
    if kind is str:
        return _str_json_length(value)
    if kind is int:
        try:
            return len(str(value))
        except ValueError:  # more digits than int-to-str allows: let the slow path decide
            return None
    if kind is bool:
        return 4 if value else 5
    if value is None:
        return 4
    if kind is float:
        return len(repr(value)) if math.isfinite(value) else None
    if kind is list:
        elements: list[Any] = value
        total = 1 + len(elements) if elements else 2
        for element in elements:
            length = _json_length(element)
            if length is None:
                return None
            total += length
        return total
    return None


def _tokens_of_length(length: int) -> int:
    return (length + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def _text_like_tokens(part: Any) -> int:
    content = part.content
    return PART_OVERHEAD_TOKENS + (_tokens_of_length(len(content)) if content else 0)


def _user_prompt_tokens(part: Any) -> int:
    content = part.content
    if content.__class__ is str:
        return PART_OVERHEAD_TOKENS + _tokens_of_length(len(content))
    return _estimate_part_tokens(part, estimate_text_tokens)


def _tool_return_tokens(part: Any) -> int:
    content = part.content
    length = len(content) if content.__class__ is str else _json_length(content) if content.__class__ is dict else None
    if length is None:
        return _estimate_part_tokens(part, estimate_text_tokens)
    return PART_OVERHEAD_TOKENS + _tokens_of_length(length) + _tokens_of_length(len(part.tool_name))


def _tool_call_tokens(part: Any) -> int:
    args = part.args
    length = len(args) if args.__class__ is str else 2 if not args else _args_length(args)
    if length is None:
        return _estimate_part_tokens(part, estimate_text_tokens)
    return PART_OVERHEAD_TOKENS + _tokens_of_length(length) + _tokens_of_length(len(part.tool_name))


_FAST_PARTS: dict[type, Callable[[Any], int]] = {
    TextPart: _text_like_tokens,
    ThinkingPart: _text_like_tokens,
    SystemPromptPart: _text_like_tokens,
    CompactionPart: _text_like_tokens,
    UserPromptPart: _user_prompt_tokens,
    ToolReturnPart: _tool_return_tokens,
    ToolCallPart: _tool_call_tokens,
}


_TEXT_LIKE = frozenset({TextPart, ThinkingPart, SystemPromptPart, CompactionPart})


def approx_message_tokens(message: ModelMessage) -> int:
    """`estimate_message_tokens(message)` with the default text estimate, the same number computed faster: the
    common part kinds are measured by the length of their text, dict tool results without serializing them."""
    return approx_messages_tokens((message,))[0]


def approx_messages_tokens(messages: Sequence[ModelMessage]) -> list[int]:
    """`approx_message_tokens` of each message, in one loop (a long history counted the first time, e.g. one just
    loaded from a store): the usual parts (tool results, text, tool calls, user prompts) are measured inline, in
    the order of how common they are, without a function call per message or part."""
    fast, text_like, per_token = _FAST_PARTS.get, _TEXT_LIKE, CHARS_PER_TOKEN
    tool_return, text, tool_call, user_prompt = ToolReturnPart, TextPart, ToolCallPart, UserPromptPart
    request = ModelRequest
    counts: list[int] = []
    append = counts.append
    for message in messages:
        total = MESSAGE_OVERHEAD_TOKENS
        parts: Sequence[Any] = message.parts
        for part in parts:
            kind = part.__class__
            if kind is tool_return:
                content = part.content
                if content.__class__ is str:
                    total += PART_OVERHEAD_TOKENS + (len(content) + per_token - 1) // per_token
                    total += (len(part.tool_name) + per_token - 1) // per_token
                    continue
            elif kind is text or kind in text_like:
                content = part.content
                total += PART_OVERHEAD_TOKENS + ((len(content) + per_token - 1) // per_token if content else 0)
                continue
            elif kind is tool_call:
                args = part.args
                length = len(args) if args.__class__ is str else _args_length(args) if args else 2
                if length is not None:
                    total += PART_OVERHEAD_TOKENS + (length + per_token - 1) // per_token
                    total += (len(part.tool_name) + per_token - 1) // per_token
                    continue
            elif kind is user_prompt:
                content = part.content
                if content.__class__ is str:
                    total += PART_OVERHEAD_TOKENS + (len(content) + per_token - 1) // per_token
                    continue
            measure = fast(kind)
            total += measure(part) if measure is not None else _estimate_part_tokens(part, estimate_text_tokens)
        if isinstance(message, request) and message.instructions:
            total += _tokens_of_length(len(message.instructions))
        append(total)
    return counts
