"""Pair-safe cutoffs: where a history can be cut without separating a tool call from its result."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart

from ._messages import ToolPairIndex, has_user_voice
from ._sizes import ContextSize, keep_tokens, normalize_keep
from ._tokens import _default_counter  # pyright: ignore[reportPrivateUsage]

__all__ = ["cut_keeps_pairs", "find_safe_cutoff", "head_count", "inflight_start", "safe_head_end", "unanswered_start"]


def inflight_start(messages: Sequence[ModelMessage]) -> int:
    """Where the in-flight exchange starts: the last request with a user voice (a new prompt, pending tool
    results; a summary or system prompt after it comes along), or, when the history ends with a response, that
    response and the request it answers. The earlier requests of a trailing run were never answered (failed
    model calls, prompts queued offline): a cut between two of them is safe when no tool call is open across it,
    which the pair closure of `find_safe_cutoff` sees to (tool results pull in the response that made the calls)."""
    j = len(messages)
    if j and isinstance(messages[-1], ModelResponse):
        j -= 1
    while j > 0 and isinstance(request := messages[j - 1], ModelRequest):
        j -= 1
        if has_user_voice(request):
            break
    return j


def unanswered_start(messages: Sequence[ModelMessage]) -> int:
    """Where the requests the model has not answered yet start: after the last response (or, when the history
    ends with a response, after the one before it). Tool results in them are news to the model."""
    j = len(messages)
    if j and isinstance(messages[-1], ModelResponse):
        j -= 1
    while j > 0 and isinstance(messages[j - 1], ModelRequest):
        j -= 1
    return j


def _close_pairs(index: ToolPairIndex, cutoff: int) -> int:
    """Move `cutoff` back until no kept message holds a result whose call was cut."""
    earliest = index.earliest_call_for_message
    n = len(earliest)
    suffix_min = [0] * (n + 1)
    suffix_min[n] = n
    for i in range(n - 1, -1, -1):
        suffix_min[i] = min(earliest[i], suffix_min[i + 1])
    while cutoff < n and suffix_min[cutoff] < cutoff:
        cutoff = suffix_min[cutoff]
    return cutoff


def cut_keeps_pairs(messages: Sequence[ModelMessage], cutoff: int) -> bool:
    """Whether a cut at `cutoff` orphans no result: no message from `cutoff` on answers a call made before it (a
    cut planned on an earlier history may not be safe any more once a late result arrived)."""
    return _close_pairs(ToolPairIndex.build(messages), cutoff) == cutoff


def safe_head_end(messages: Sequence[ModelMessage], head: int) -> int:
    """Extend a kept head so it does not end on a response whose calls are answered after it, and so it holds
    every result of the calls it holds (a response's results can be spread over several requests)."""
    head = _extend_over_requests(messages, min(head, len(messages)))
    if head <= 0 or head >= len(messages):
        return head
    index = ToolPairIndex.build(messages)
    while True:
        calls_in_head = (call_id for call_id, at in index.calls.items() if at < head)
        last = max((r for call_id in calls_in_head for r in index.results.get(call_id, ()) if r >= head), default=-1)
        if last < head:
            return head
        head = _extend_over_requests(messages, last + 1)


def head_count(
    messages: Sequence[ModelMessage],
    keep_head: ContextSize,
    *,
    max_tokens: int | None = None,
    message_tokens: Callable[[ModelMessage], int] | None = None,
) -> int:
    """How many leading messages a `keep_head` keeps before `safe_head_end` makes the head pair-safe: a message
    count, or the leading messages that fit in a token keep (a fraction of `max_tokens`)."""
    budget = keep_tokens(keep_head, max_tokens)
    if budget is None:
        return min(int(keep_head[1]), len(messages))
    count = message_tokens or _default_counter.count_message
    total = 0
    for i, message in enumerate(messages):
        total += count(message)
        if total > budget:
            return i
    return len(messages)


def _extend_over_requests(messages: Sequence[ModelMessage], head: int) -> int:
    n = len(messages)
    while 0 < head < n:
        last = messages[head - 1]
        if not (isinstance(last, ModelResponse) and any(isinstance(p, ToolCallPart) for p in last.parts)):
            break
        extended = head
        while extended < n and isinstance(messages[extended], ModelRequest):
            extended += 1
        if extended == head:
            break  # calls followed by another response (a broken input history): nothing to extend over
        head = extended
    return head


def find_safe_cutoff(
    messages: Sequence[ModelMessage],
    keep: Any,
    *,
    max_tokens: int | None = None,
    message_tokens: Callable[[ModelMessage], int] | None = None,
) -> int:
    """Return the index `i` such that `messages[i:]` is the kept tail.

    Args:
        messages: the history.
        keep: an `int` number of messages, or a `ContextSize`: `("messages", n)`, `("tokens", n)` (the most recent
            messages that fit in n tokens), `("fraction", f)` (of `max_tokens`).
        max_tokens: the token budget a fraction refers to.
        message_tokens: a per-message counter for token keeps (default: the approximate estimate).

    The tail never holds a tool result whose call was cut (the cut moves back to the response that made the
    call, through the tool-pair index, however far back it is), and it always holds the in-flight exchange: a
    keep of 0 keeps the new user prompt, or pending tool results together with the response that made the calls.
    A history that ends with several unanswered requests is cut between them like any other messages (ten
    queued prompts with a keep of 3 keep the last three), never while a tool call is open across the cut.

    Example:
        ```python
        cut = find_safe_cutoff(messages, 10)
        kept = messages[cut:]
        ```
    """
    size = normalize_keep(keep)
    n = len(messages)
    if n == 0:
        return 0
    budget_tokens = keep_tokens(size, max_tokens)
    if budget_tokens is None:
        cutoff = max(0, n - int(size[1]))
    else:
        cutoff = _token_cutoff(messages, budget_tokens, message_tokens)
    cutoff = min(cutoff, inflight_start(messages))
    return _close_pairs(ToolPairIndex.build(messages), cutoff)


def _token_cutoff(
    messages: Sequence[ModelMessage], budget: int, message_tokens: Callable[[ModelMessage], int] | None
) -> int:
    count = message_tokens or _default_counter.count_message
    total = 0
    cutoff = len(messages)
    while cutoff > 0:
        cost = count(messages[cutoff - 1])
        if total + cost > budget:
            break
        total += cost
        cutoff -= 1
    return cutoff
