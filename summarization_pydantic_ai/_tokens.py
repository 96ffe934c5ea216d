"""Token accounting: approximate, usage-anchored, tokenizer-based and provider counters.

Every counter is a callable `messages -> int` (sync) or `messages -> Awaitable[int]` (async); the processors
accept both. Counters built on a per-message estimate (`IncrementalCounter`)
cache each message's count and the running total of the history they saw last, so a call on a history that
grew by k messages costs O(k), not O(n).
"""

from __future__ import annotations

import inspect
import logging
import math
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from operator import is_
from typing import Any, Protocol, runtime_checkable

from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    VideoUrl,
)

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

    def __len__(self) -> int:
        return len(self._values)


_CHECKPOINT_TAIL = 16
_CHECKPOINT_SPREAD = 16
_MAX_STATES = 32


def _checkpoints(messages: Sequence[ModelMessage]) -> list[tuple[int, ModelMessage]]:  # pyright: ignore[reportUnusedFunction]
    """The last 16 positions and 16 spread over the history, with their messages, in position order (the
    summary scan of `UsageAnchoredCounter` uses it)."""
    n = len(messages)
    tail_start = max(0, n - _CHECKPOINT_TAIL)
    step = max(1, n // _CHECKPOINT_SPREAD)
    return [(i, messages[i]) for i in (*range(0, tail_start, step), *range(tail_start, n))]


def _spread_step(length: int) -> int:
    """The largest power of two <= length / 16 (at least 1): 16 to 32 spread positions, multiples of the step.

    A power of two keeps the sample stable as the history grows: the step only ever doubles, and the positions
    of a doubled step are a subset of the previous ones, so a grown history reuses its sample."""
    return 1 << max(0, (length // _CHECKPOINT_SPREAD).bit_length() - 1)


def _sample(messages: Sequence[ModelMessage], start: int, stop: int, step: int = 1) -> tuple[ModelMessage, ...]:
    if isinstance(messages, list | tuple):
        return tuple(messages[start:stop:step])
    return tuple(messages[i] for i in range(start, stop, step))


@dataclass(frozen=True, eq=False)
class _PrefixState:
    """The total of a history of `length` messages and a bounded sample of its message identities: the last
    16 (`tail`) and every `step`-th from the start (`spread`, 16 to 32 messages)."""

    length: int
    total: int
    step: int
    spread: tuple[ModelMessage, ...]
    tail: tuple[ModelMessage, ...]

    @classmethod
    def build(cls, messages: Sequence[ModelMessage], total: int) -> _PrefixState:
        n = len(messages)
        step = _spread_step(n)
        return cls(n, total, step, _sample(messages, 0, n, step), _sample(messages, max(0, n - _CHECKPOINT_TAIL), n))

    def matches(self, messages: Sequence[ModelMessage]) -> bool:
        """Whether `messages` starts with the sampled identities of this state's history."""
        n = self.length
        if len(messages) < n:
            return False
        tail = _sample(messages, n - len(self.tail), n)
        return all(map(is_, tail, self.tail)) and all(map(is_, _sample(messages, 0, n, self.step), self.spread))

    def grown(self, messages: Sequence[ModelMessage], total: int) -> _PrefixState:
        """The state of `messages`, a history that starts with this state's (already checked). Cost O(new
        messages): the spread sample is reused (halved when its step doubles) and extended at the end."""
        n, old = len(messages), self.length
        if n == old:
            return self if total == self.total else replace(self, total=total)
        step, spread = _spread_step(n), self.spread
        if step != self.step:
            spread = spread[:: step // self.step]
        first_new = -(-old // step) * step  # the first multiple of step at or after the old length
        if first_new < n:
            spread += _sample(messages, first_new, n, step)
        return _PrefixState(n, total, step, spread, _sample(messages, max(0, n - _CHECKPOINT_TAIL), n))


@dataclass(eq=False)
class IncrementalCounter:
    """A counter built from a per-message estimate, cached per message and per history prefix.

    A history seen before (same first message) that grew at the end is counted from the previous total plus the
    new messages only. The previous prefix is checked against a bounded sample of message identities (the last
    16 and 16 to 32 spread over the history); use [`count`][summarization_pydantic_ai.IncrementalCounter.count]
    with `verify=True` for a full identity check, which the processors do when an estimate comes near a trigger.

    Example:
        ```python
        counter = IncrementalCounter(estimate_message_tokens)
        counter(messages)  # O(n) the first time
        counter(messages + new)  # O(len(new))
        ```
    """

    message_tokens: Callable[[ModelMessage], int] = estimate_message_tokens
    _cache: _MessageCache = field(default_factory=_MessageCache, init=False, repr=False)
    _states: dict[int, _PrefixState] = field(default_factory=dict[int, _PrefixState], init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __call__(self, messages: Sequence[ModelMessage]) -> int:
        return self.count(messages)

    def count_message(self, message: ModelMessage) -> int:
        """One message's count (cached)."""
        return self._cache.get_or_compute(message, self.message_tokens)

    def count(self, messages: Sequence[ModelMessage], *, verify: bool = False) -> int:
        n = len(messages)
        if not n:
            return 0
        key = id(messages[0])
        with self._lock:
            state = self._states.get(key)
        count_message = self.count_message
        if state is not None and self._prefix_matches(state, messages, verify):
            total = state.total + sum(count_message(messages[i]) for i in range(state.length, n))
            new_state = state.grown(messages, total)
        else:
            total = sum(count_message(m) for m in messages)
            new_state = _PrefixState.build(messages, total)
        with self._lock:
            self._states.pop(key, None)
            self._states[key] = new_state
            while len(self._states) > _MAX_STATES:
                self._states.pop(next(iter(self._states)))
        return total

    def _prefix_matches(self, state: _PrefixState, messages: Sequence[ModelMessage], verify: bool) -> bool:
        if not state.matches(messages):
            return False
        if not verify:
            return True
        cached = self._cache
        return sum(cached.get_or_compute(m, self.message_tokens) for m in messages[: state.length]) == state.total

    def invalidate(self) -> None:
        """Forget the prefix totals (per-message results stay valid)."""
        with self._lock:
            self._states.clear()


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
