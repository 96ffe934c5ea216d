"""Turn any pydantic-ai message into readable text, for summaries, search and token estimates.

One walker ([`part_text`][summarization_pydantic_ai._render.part_text]) knows every part kind; the renderer
adds labels and the token estimator counts the same text, so what is summarized is what is counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, cast

from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CachePoint,
    CompactionPart,
    DocumentUrl,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UploadedFile,
    UserPromptPart,
    VideoUrl,
)

from ._messages import get_message_id

__all__ = ["MediaItem", "iter_media", "part_label", "part_text", "render_message", "render_messages"]

MediaItem = ImageUrl | AudioUrl | DocumentUrl | VideoUrl | BinaryContent | UploadedFile


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"))
"""What `json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))` builds on every call, built once."""


def _json(value: Any) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError):
        return str(value)


def _describe_media(item: MediaItem) -> str:
    if isinstance(item, BinaryContent):
        return f"[binary {item.media_type}, {len(item.data)} bytes]"
    if isinstance(item, UploadedFile):
        return f"[uploaded file {item.file_id}]"
    kind = type(item).__name__.removesuffix("Url").lower()
    return f"[{kind}: {item.url}]"


def _content_text(content: Any) -> str:
    """Readable text of user-prompt or tool-return content: strings as they are, media described, data as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, TextContent):
        return content.content
    if isinstance(content, MediaItem):
        return _describe_media(content)
    if isinstance(content, CachePoint):
        return ""
    if isinstance(content, list | tuple):
        pieces = [_content_text(item) for item in content]  # pyright: ignore[reportUnknownVariableType]
        return "\n".join(p for p in pieces if p)
    return _json(content)


def iter_media(content: Any) -> Iterator[MediaItem]:
    """The multimodal items inside user-prompt or tool-return content."""
    if isinstance(content, MediaItem):
        yield content
    elif isinstance(content, list | tuple):
        for item in content:  # pyright: ignore[reportUnknownVariableType]
            yield from iter_media(item)


_FIXED_LABELS: dict[type, str] = {
    SystemPromptPart: "System",
    UserPromptPart: "User",
    ThinkingPart: "Thinking",
    CompactionPart: "Summary",
    TextPart: "Assistant",
    FilePart: "File",
}
"""Labels of the part types (exactly these types: a subclass takes the general path) that name no tool."""


def part_label(part: Any) -> str:
    """A short label for a part: `User`, `Assistant`, `Tool call`, `Tool result`, `Summary`..."""
    kind = part.__class__
    fixed = _FIXED_LABELS.get(kind)
    if fixed is not None:
        return fixed
    if kind is ToolReturnPart and part.outcome == "success":
        return f"Tool result {part.tool_name} [{part.tool_call_id}]"
    if kind is ToolCallPart:
        return f"Tool call {part.tool_name} [{part.tool_call_id}]"
    if isinstance(part, SystemPromptPart):
        return "System"
    if isinstance(part, UserPromptPart):
        return "User"
    if isinstance(part, ToolReturnPart | NativeToolReturnPart):
        outcome: str = part.outcome
        suffix = "" if outcome == "success" else f" ({outcome})"
        return f"Tool result {part.tool_name} [{part.tool_call_id}]{suffix}"
    if isinstance(part, RetryPromptPart):  # pyright: ignore[reportDeprecated]
        name = part.tool_name or "output"
        return f"Retry {name} [{part.tool_call_id}]"
    if isinstance(part, ToolCallPart | NativeToolCallPart):
        return f"Tool call {part.tool_name} [{part.tool_call_id}]"
    if isinstance(part, ThinkingPart):
        return "Thinking"
    if isinstance(part, CompactionPart):
        return "Summary"
    if isinstance(part, TextPart):
        return "Assistant"
    if isinstance(part, FilePart):
        return "File"
    return str(getattr(part, "part_kind", type(part).__name__))


def part_text(part: Any) -> str:
    """The readable text of one part of any kind (tool args and returns included, media described)."""
    kind = part.__class__
    if kind is ToolReturnPart or kind is UserPromptPart or kind is TextPart:  # the common kinds, first
        content = part.content
        if isinstance(content, str):
            return content
    if isinstance(part, ToolCallPart | NativeToolCallPart):
        args = part.args
        return args if isinstance(args, str) else _json(args or {})
    if isinstance(part, FilePart):
        return _describe_media(part.content)
    content = getattr(part, "content", None)
    if isinstance(part, ThinkingPart | TextPart | CompactionPart | SystemPromptPart):
        return content or ""
    if content is None:
        # Configuration deltas and other bookkeeping parts: their fields, so nothing is silently invisible.
        attributes = cast(dict[str, Any], vars(part))
        fields = {k: v for k, v in attributes.items() if k not in {"part_kind", "timestamp"} and v is not None}
        return _json(fields) if fields else ""
    return _content_text(content)


def render_message(message: ModelMessage, *, max_part_chars: int | None = None, index: int | None = None) -> str:
    """Render one message as labelled lines, e.g. `User: ...`, `Tool call grep [c1]: {...}`.

    Args:
        message: any request or response.
        max_part_chars: when set, a longer part keeps its head and tail with a marker saying how much was cut.
        index: when given, the header names the message's position (and its stable id if recorded).
    """
    lines: list[str] = []
    if index is not None:
        message_id = get_message_id(message)
        lines.append(f"--- message {index} (id {message_id}) ---" if message_id else f"--- message {index} ---")
    response = isinstance(message, ModelResponse)
    for part in message.parts:
        text = part_text(part)
        if max_part_chars is not None and len(text) > max_part_chars:
            text = elide_middle(text, max_part_chars)
        label = "Provider summary" if response and isinstance(part, CompactionPart) else part_label(part)
        lines.append(f"{label}: {text}" if text else f"{label}:")
    if isinstance(message, ModelRequest) and message.instructions and index is not None and not lines[1:]:
        lines.append(f"Instructions: {message.instructions}")
    return "\n".join(lines)


def render_messages(
    messages: Sequence[ModelMessage], *, max_part_chars: int | None = None, start_index: int = 0
) -> str:
    """Render a sequence of messages, each under a header with its position and stable id."""
    return "\n".join(
        render_message(m, max_part_chars=max_part_chars, index=start_index + i) for i, m in enumerate(messages)
    )


def elide_middle(text: str, max_chars: int) -> str:
    """Keep the head and tail of `text` within `max_chars`, with a marker saying how many characters were cut."""
    if len(text) <= max_chars:
        return text
    keep = max(max_chars - 60, 2)
    head = keep * 2 // 3
    tail = keep - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters elided ...]\n{text[len(text) - tail :]}"
