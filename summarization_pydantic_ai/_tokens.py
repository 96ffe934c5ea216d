"""Token accounting: approximate, usage-anchored, tokenizer-based and provider counters.

Every counter is a callable `messages -> int` (sync) or `messages -> Awaitable[int]` (async); the processors
accept both. Counters built on a per-message estimate (`IncrementalCounter`)
cache each message's count and the running total of the history they saw last, so a call on a history that
grew by k messages costs O(k), not O(n).
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CompactionPart,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    VideoUrl,
)

from ._cursor import CursorTable, HistoryCursor
from ._render import iter_media, part_text

__all__ = [
    "AUDIO_TOKENS",
    "CHARS_PER_TOKEN",
    "DOCUMENT_TOKENS",
    "IMAGE_TOKENS",
    "VIDEO_TOKENS",
    "IncrementalCounter",
    "RequestAwareCounter",
    "RequestInfo",
    "TokenCounter",
    "async_count_tokens",
    "count_tokens_approximately",
    "estimate_message_tokens",
    "estimate_text_tokens",
]

logger = logging.getLogger("summarization_pydantic_ai")

TokenCounter = Callable[[Sequence[ModelMessage]], int | Awaitable[int]]
"""A sync or async callable that counts the tokens of a list of messages."""

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


def _estimate_part_tokens(part: Any, text_tokens: Callable[[str], int]) -> int:
    content = getattr(part, "content", None)
    media = list(iter_media(content)) if content is not None and not isinstance(content, str) else []
    text = part_text(part)
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
        for key, item in items.items():
            if key.__class__ is not str:
                return None
            total += _str_json_length(key)
            item_kind = item.__class__
            if item_kind is str:
                total += _str_json_length(item)
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
    length = len(args) if args.__class__ is str else 2 if not args else _json_length(args)
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


def _approx_message_tokens(message: ModelMessage) -> int:
    """`estimate_message_tokens(message)` with the default text estimate, the same number computed faster: the
    common part kinds are measured by the length of their text, and JSON arguments without serializing them."""
    fast = _FAST_PARTS.get
    total = MESSAGE_OVERHEAD_TOKENS
    for part in message.parts:
        measure = fast(part.__class__)
        total += measure(part) if measure is not None else _estimate_part_tokens(part, estimate_text_tokens)
    if isinstance(message, ModelRequest) and message.instructions:
        total += _tokens_of_length(len(message.instructions))
    return total


class _MessageCache:
    """Per-message results keyed by identity; an entry goes away with its message."""

    def __init__(self) -> None:
        self._values: dict[int, int] = {}
        self._lock = threading.Lock()

    def get_or_compute(self, message: ModelMessage, compute: Callable[[ModelMessage], int]) -> int:
        key = id(message)
        value = self._values.get(key)
        if value is not None:
            return value
        value = compute(message)
        with self._lock:
            if key not in self._values:
                weakref.finalize(message, self._values.pop, key, None)
            self._values[key] = value
        return value

    def discard(self, message: ModelMessage) -> None:
        """Forget one message's result (it was edited in place)."""
        with self._lock:
            self._values.pop(id(message), None)

    def __len__(self) -> int:
        return len(self._values)


_MAX_STATES = 32


class _Tally(HistoryCursor):
    """A cursor that also keeps each message's count and the total of the history it was advanced to."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        super().__init__()
        self.counts: list[int] = []
        self.total = 0


@dataclass(eq=False)
class IncrementalCounter:
    """A counter built from a per-message estimate that re-measures only what changed since its previous call.

    For each history it saw (up to 32, told apart by their first message) it keeps a
    [`HistoryCursor`][summarization_pydantic_ai.HistoryCursor] and every message's count. The cursor says exactly
    what changed (the identity of the whole prefix is compared, at memory speed): a history that grew by k
    messages costs O(k); a message edited in place is re-measured (its old count subtracted, the new one added);
    a history replaced from index i (a compaction, a rewind) is re-measured from i. `count(..., verify=True)`
    also checks every message, not only the last few, for in-place mutation of the same object (the processors
    do it when an estimate comes near a trigger).

    Example:
        ```python
        counter = IncrementalCounter(estimate_message_tokens)
        counter(messages)  # O(n) the first time
        counter(messages + new)  # O(len(new))
        ```
    """

    message_tokens: Callable[[ModelMessage], int] = estimate_message_tokens
    _cache: _MessageCache = field(default_factory=_MessageCache, init=False, repr=False)
    _tallies: CursorTable[_Tally] = field(
        default_factory=lambda: CursorTable(_MAX_STATES, factory=_Tally), init=False, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        # The default estimate has a faster form that gives the same counts.
        default = self.message_tokens is estimate_message_tokens
        self._measure = _approx_message_tokens if default else self.message_tokens

    def __call__(self, messages: Sequence[ModelMessage]) -> int:
        return self.count(messages)

    def count_message(self, message: ModelMessage) -> int:
        """One message's count (cached by identity)."""
        return self._cache.get_or_compute(message, self._measure)

    def count(self, messages: Sequence[ModelMessage], *, verify: bool = False) -> int:
        if not messages:
            return 0
        measure = self._measure
        with self._lock:
            tally = self._tallies.cursor_for(messages)
            change = tally.peek(messages, verify=verify)
            if change.kind == "unchanged":
                return tally.total
            counts = tally.counts
            edited = [(i, measure(messages[i])) for i in change.edited]  # measured first: a failure changes nothing
            added = list(map(measure, messages[change.start :]))
            if change.kind == "replaced":
                del counts[change.start :]
                total = sum(counts)
            else:
                total = tally.total
                for i, new in edited:  # same id, new content: the old count out, the new one in
                    self._cache.discard(messages[i])
                    total += new - counts[i]
                    counts[i] = new
            counts.extend(added)
            tally.total = total + sum(added)
            tally.commit(messages, change)
            return tally.total

    def invalidate(self) -> None:
        """Forget the histories seen (per-message results stay valid)."""
        with self._lock:
            self._tallies.clear()


_default_counter = IncrementalCounter()


def count_tokens_approximately(messages: Sequence[ModelMessage]) -> int:
    """Approximate the tokens of `messages` (about 4 characters per token, media at fixed estimates).

    Counts every part kind: system prompts, rendered instructions, user text and list content
    (`BinaryContent`/`ImageUrl`/audio/video/documents at fixed estimates), thinking, tool calls (name and args)
    and tool returns (strings, dicts, lists), retries and summaries. Cached per message and per prefix: a
    history that grew by k messages since the previous call costs O(k).
    """
    return _default_counter.count(messages)


async def async_count_tokens(counter: TokenCounter, messages: Sequence[ModelMessage]) -> int:
    """Call a sync or async counter and return an `int`, with a clear error for anything else."""
    result: Any = counter(messages)
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, bool) or not isinstance(result, int):
        raise TypeError(f"token counter {counter!r} returned {type(result).__name__}, expected int")
    if result < 0:
        raise ValueError(f"token counter {counter!r} returned a negative count ({result})")
    return result


@dataclass
class RequestInfo:
    """What a capability knows about the request being prepared, for counters that can use it."""

    model: Any = None
    model_settings: Any = None
    model_request_parameters: Any = None
    overhead_tokens: int = 0
    """Instructions and tool definitions of the request, estimated."""


@runtime_checkable
class RequestAwareCounter(Protocol):
    """A counter that measures a whole request (messages plus instructions and tools) itself.

    `threshold` is the token count at which the caller will act; counters may spend more effort (a provider
    call) only near it.
    """

    async def count_request(
        self, messages: Sequence[ModelMessage], *, request: RequestInfo, threshold: int | None
    ) -> int: ...
