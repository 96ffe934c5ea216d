"""`MessageCompressor`: the content compressors applied to the tool returns of a history, by tool name and size."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any, Literal, cast

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from .._cursor import CursorTable, HistoryCursor
from .._events import EventCallback, ToolResultsCompressed, emit_event
from ..processors._base import HistoryProcessor, RunInfo
from ._compress import compress
from ._levels import DEFAULT_CONSOLE_TOOLS, DEFAULT_SNAPSHOT_TOOLS, LEVELS, CompressionLevel, LevelSettings

__all__ = ["COMPRESSED_METADATA_KEY", "MessageCompressor"]

COMPRESSED_METADATA_KEY = "summarization_pydantic_ai.compressed"
"""Set in a compressed `ToolReturnPart.metadata`: `{"kind", "chars_before", "chars_after", "level"}`. A marked
part is never compressed again."""

_LEAVE_ALONE = (
    COMPRESSED_METADATA_KEY,
    "summarization_pydantic_ai.cleared",  # ClearToolResultsProcessor: already a placeholder
    "summarization_pydantic_ai.truncated",  # overflow recovery cut it
)
_Route = Literal["snapshot", "log", "auto"]


class _State(HistoryCursor):
    """Per history: the cursor holds the last output; `protected_from` is where its latest tool exchange began."""

    __slots__ = ("protected_from",)

    def __init__(self) -> None:
        super().__init__(fingerprint_all=False)
        self.protected_from = 0


def _protected_from(messages: Sequence[ModelMessage]) -> int:
    """Index of the latest response that called tools (its exchange is never compressed), or of the last message."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ModelResponse) and any(isinstance(p, ToolCallPart) for p in message.parts):
            return i
    return max(len(messages) - 1, 0)


def _metadata(part: ToolReturnPart) -> dict[str, Any]:
    metadata: Any = part.metadata
    return cast(dict[str, Any], metadata) if isinstance(metadata, dict) else {}


@dataclass
class MessageCompressor(HistoryProcessor):
    """Compress old tool returns with the structure-aware compressors, at a `level` (`none | low | medium | high`,
    see `LEVELS`): returns of snapshot tools (`snapshot_tools` patterns) with `compress_snapshot`, of console
    tools (`console_tools`) with `compress_log`, and any other return above the level's size by its detected kind.

    User prompts, tool calls and the latest tool exchange (the last response that called tools and the returns
    after it) are never touched; nor are returns already compressed, cleared or truncated. A compressed part
    keeps its call id and says what happened under `COMPRESSED_METADATA_KEY`. Deterministic and idempotent;
    the history's shape never changes, so it always passes `validate_history` when its input does.

    Each message is compressed once: an unchanged history costs a cursor check, a grown one the new messages.

    Example:
        ```python
        from pydantic_ai import Agent
        from pydantic_ai.capabilities import ProcessHistory

        from summarization_pydantic_ai.compression import MessageCompressor

        agent = Agent('test', capabilities=[ProcessHistory(MessageCompressor(level='medium'))])
        ```
    """

    level: CompressionLevel = "medium"
    snapshot_depth: int | None = None
    """Outline levels a snapshot keeps; `None`: the level's depth."""
    snapshot_tools: Sequence[str] = DEFAULT_SNAPSHOT_TOOLS
    """Tool-name patterns (`fnmatch`, case-insensitive) whose returns are page snapshots."""
    console_tools: Sequence[str] = DEFAULT_CONSOLE_TOOLS
    """Tool-name patterns whose returns are console output or logs."""
    exclude_tools: Sequence[str] = ()
    """Tool-name patterns whose returns are never compressed."""
    protect_latest: bool = False
    """Leave the latest tool exchange as it came and compress it at the next request. Off by default: an output
    is compressed when it enters the history, before any request has cached it; compressing it one request later
    rewrites the cached prefix from that output on (every later token a cache write, see `CachePolicy`)."""
    event_callback: EventCallback | None = None
    _settings: LevelSettings | None = field(init=False, repr=False)
    _states: CursorTable[_State] = field(
        default_factory=lambda: CursorTable(32, factory=_State), init=False, repr=False
    )
    _memo: dict[int, tuple[ModelMessage, ModelMessage]] = field(
        default_factory=dict[int, tuple[ModelMessage, ModelMessage]], init=False, repr=False
    )
    _routes: dict[str, _Route | None] = field(default_factory=dict[str, "_Route | None"], init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {self.level!r}")
        if self.snapshot_depth is not None and self.snapshot_depth < 1:
            raise ValueError(f"snapshot_depth must be >= 1 or None, got {self.snapshot_depth}")
        for name in ("snapshot_tools", "console_tools", "exclude_tools"):
            value: Any = getattr(self, name)
            if isinstance(value, str):
                raise TypeError(f"{name} must be a sequence of tool-name patterns, not a string: use ({value!r},)")
        self._settings = LEVELS[self.level]

    async def process(self, messages: list[ModelMessage], run: RunInfo | None) -> list[ModelMessage]:
        if self._settings is None or not messages:
            return messages
        with self._lock:
            result, compressed = self._process(messages, self._settings)
        if compressed:
            before = sum(p.metadata[COMPRESSED_METADATA_KEY]["chars_before"] for p in compressed)  # type: ignore[index]
            after = sum(p.metadata[COMPRESSED_METADATA_KEY]["chars_after"] for p in compressed)  # type: ignore[index]
            ids = tuple(p.tool_call_id for p in compressed)
            event = ToolResultsCompressed(type(self).__name__, len(compressed), before, after, ids)
            await emit_event(self.event_callback, event)
        return result

    def _process(
        self, messages: list[ModelMessage], settings: LevelSettings
    ) -> tuple[list[ModelMessage], list[ToolReturnPart]]:
        state = self._states.cursor_for(messages)
        change = state.peek(messages)
        if change.kind == "unchanged":
            return messages, []  # our own last output (or an input that needed nothing)
        start = min(change.start, state.protected_from, *change.edited)
        protect = _protected_from(messages) if self.protect_latest else len(messages)
        result: list[ModelMessage] | None = None
        compressed: list[ToolReturnPart] = []
        for i in range(start, protect):
            message = messages[i]
            new = self._message(message, settings, compressed)
            if new is not message:
                if result is None:
                    result = list(messages)
                result[i] = new
        out = result if result is not None else messages
        state.advance(out)
        state.protected_from = protect
        if len(self._memo) > 4 * len(messages) + 1_000:
            self._memo.clear()  # entries of histories gone by; rebuilt as needed
        return out, compressed

    def _message(
        self, message: ModelMessage, settings: LevelSettings, compressed: list[ToolReturnPart]
    ) -> ModelMessage:
        if not isinstance(message, ModelRequest):
            return message
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        parts = list(message.parts)
        changed = False
        for j, part in enumerate(parts):
            if isinstance(part, ToolReturnPart):
                new = self._part(part, settings)
                if new is not None:
                    parts[j] = new
                    compressed.append(new)
                    changed = True
        new_message = replace(message, parts=parts) if changed else message
        self._memo[id(message)] = (message, new_message)
        return new_message

    def _route(self, tool_name: str) -> _Route | None:
        """`snapshot`, `log`, `auto` (by size and detected kind) or `None` (excluded), cached per tool name."""
        if tool_name in self._routes:
            return self._routes[tool_name]
        name = tool_name.lower()

        def matches(patterns: Sequence[str]) -> bool:
            return any(fnmatchcase(name, pattern.lower()) for pattern in patterns)

        route: _Route | None = (
            None
            if matches(self.exclude_tools)
            else "snapshot"
            if matches(self.snapshot_tools)
            else "log"
            if matches(self.console_tools)
            else "auto"
        )
        self._routes[tool_name] = route
        return route

    def _part(self, part: ToolReturnPart, settings: LevelSettings) -> ToolReturnPart | None:
        metadata = _metadata(part)
        if any(key in metadata for key in _LEAVE_ALONE):
            return None
        route = self._route(part.tool_name)
        content: Any = part.content
        if route is None or not isinstance(content, str | dict | list):
            return None  # multimodal and other objects pass as they are
        text = content if isinstance(content, str) else part.model_response_str()
        if len(text) < (settings.min_chars if route == "auto" else settings.routed_min_chars):
            return None
        result = compress(
            text,
            route,
            snapshot_depth=self.snapshot_depth or settings.snapshot_depth,
            snapshot_text_chars=settings.snapshot_text_chars,
            snapshot_images=settings.snapshot_images,
            log_head=settings.log_head,
            log_tail=settings.log_tail,
            json_items=settings.json_items,
            max_chars=settings.max_chars,
        )
        if not result.changed:
            return None
        mark = {"kind": result.kind, "chars_before": result.chars_before, "chars_after": result.chars_after}
        return replace(
            part, content=result.text, metadata={**metadata, COMPRESSED_METADATA_KEY: {**mark, "level": self.level}}
        )
