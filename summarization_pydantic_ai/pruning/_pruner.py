"""`ImportancePruner`: drop the least important messages until the context fits, with no model call."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from .._artifacts import todo_items
from .._cache_policy import CachePolicy
from .._compaction import latest_user_request_at
from .._events import ContextReduced, EventCallback, emit_event
from .._messages import get_message_id, is_summary_message
from .._render import part_text
from .._sizes import Measure
from .._thinning import thin_outputs, thinning_event
from .._tokens import (
    TokenCounter,
    _default_counter,  # pyright: ignore[reportPrivateUsage]
    async_count_tokens,
    count_tokens_approximately,
    estimate_message_tokens,
)
from ..processors._base import HistoryProcessor, RunInfo, check_counter, measure
from ..processors._summary_plan import new_problems
from ._scoring import (
    DEFAULT_STATE_CHANGE_TOOLS,
    ImportanceScore,
    ImportanceWeights,
    Unit,
    build_units,
    score_units,
)

__all__ = ["MERGED_METADATA_KEY", "ImportancePruner"]

logger = logging.getLogger("summarization_pydantic_ai")

MERGED_METADATA_KEY = "summarization_pydantic_ai.merged"
"""Message metadata of a tool exchange that stands for earlier identical ones the pruner merged into it: how many."""

_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


@dataclass
class ImportancePruner(HistoryProcessor):
    """Drop the lowest-scoring messages until the context is at most `target_tokens`, with no model call.

    Every message is scored (see `ImportanceWeights`): errors, state changes, user instructions, recency and
    references by later messages. When the context exceeds `trigger_tokens` (default: `target_tokens`), units
    (a tool call with all its results, or a single message) are dropped lowest score first, older first on ties,
    until the target is met. Never dropped: the first instructions (the requests before the first response), the
    latest user request, the latest exchange (the last response and what follows it), summaries, and the messages
    `keep_predicate` accepts. The kept messages stay in chronological order, a tool call never loses its results,
    and the output passes `validate_history`. With `merge_similar`, a run of consecutive tool exchanges with the
    same tools and the same results (digits and spacing aside) is merged into its latest one first.

    Example:
        ```python
        agent = Agent('openai:gpt-4.1', capabilities=[ImportancePruner(target_tokens=60_000, trigger_tokens=80_000)])
        ```
    """

    target_tokens: int = 100_000
    trigger_tokens: int | None = None
    """Prune when the context exceeds this (default: `target_tokens`); above the target, pruning happens less often
    (a stable prefix keeps the provider's prompt cache warm)."""
    weights: ImportanceWeights = field(default_factory=ImportanceWeights)
    state_change_tools: Sequence[str] = DEFAULT_STATE_CHANGE_TOOLS
    """Tool-name patterns (`fnmatch`, case-insensitive) whose calls change state."""
    keep_predicate: Callable[[ModelMessage], bool] | None = None
    """Messages for which this returns True are never dropped (with the tool exchange they belong to)."""
    protect_score: float | None = None
    """Units scoring at least this are never dropped (an importance threshold); `None`: no threshold."""
    merge_similar: bool = False
    token_counter: TokenCounter = count_tokens_approximately
    event_callback: EventCallback | None = None
    cache_policy: CachePolicy | None = None
    """Plan the pruning by what it costs with the prompt cache counted: from `trigger_tokens` on, prune where the
    cut pays for its cache re-write (see `CachePolicy`), at the latest at the policy's limit of `max_tokens`."""
    max_tokens: int | None = None
    """The budget the policy's hard limit refers to (the context window minus the output reserve)."""

    def __post_init__(self) -> None:
        for name in ("target_tokens", "trigger_tokens"):
            value: Any = getattr(self, name)
            if value is None and name == "trigger_tokens":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.trigger_tokens is not None and self.trigger_tokens < self.target_tokens:
            raise ValueError(
                f"trigger_tokens ({self.trigger_tokens}) must be at least target_tokens ({self.target_tokens})"
            )
        if not isinstance(self.weights, ImportanceWeights):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"weights must be an ImportanceWeights, got {self.weights!r}")
        if isinstance(self.state_change_tools, str):
            raise TypeError("state_change_tools must be a sequence of patterns, e.g. ('write*',), not a string")
        self.state_change_tools = tuple(self.state_change_tools)
        if self.keep_predicate is not None and not callable(self.keep_predicate):
            raise TypeError(f"keep_predicate must be a callable (message) -> bool, got {self.keep_predicate!r}")
        check_counter(self.token_counter)

    def _due(self, messages: list[ModelMessage], size: Measure) -> bool:
        trigger = self.trigger_tokens or self.target_tokens
        if self.cache_policy is None:
            return size.tokens > trigger
        return self.cache_policy.due(messages, size, ("tokens", trigger + 1), ("tokens", self.target_tokens))

    def score(self, messages: Sequence[ModelMessage]) -> list[ImportanceScore]:
        """The score of every unit of `messages`, in history order (tokens by the approximate estimate)."""
        units = build_units(messages)
        return self._score(messages, units, [estimate_message_tokens(m) for m in messages])

    async def process(self, messages: list[ModelMessage], run: RunInfo | None) -> list[ModelMessage]:
        if not messages:
            return messages
        size = await measure(messages, self.token_counter, run, self.max_tokens, None)
        if not self._due(messages, size):
            return messages
        original, messages = messages, self._thinned(messages)
        if messages is not original:
            size = await measure(messages, self.token_counter, run, self.max_tokens, None)
        counts = await self._message_counts(messages)
        units = build_units(messages)
        scores = self._score(messages, units, counts)
        kept = [True] * len(messages)
        merged = self._merge_similar(messages, units, scores, kept) if self.merge_similar else {}
        excess = size.tokens - self.target_tokens - sum(counts[i] for i, k in enumerate(kept) if not k)
        _drop_lowest(messages, scores, kept, excess)
        if all(kept):
            if messages is not original:  # thinning alone brought it down: nothing to drop
                thinned_event = thinning_event(type(self).__name__, original, messages)
                if thinned_event is not None:
                    await emit_event(self.event_callback, thinned_event)
            return messages
        result = [_annotated(messages[i], merged.get(i, 0)) for i, k in enumerate(kept) if k]
        problems = new_problems(messages, result)
        if problems:  # never expected: a guard, so a bug costs tokens, not a broken run
            logger.warning("importance pruning left the history unchanged: it would add %s", problems)
            return original
        after = await measure(result, self.token_counter, run, None, None)
        removed = tuple(mid for i, k in enumerate(kept) if not k and (mid := get_message_id(messages[i])))
        event = ContextReduced(
            type(self).__name__, "importance", size.tokens, after.tokens, len(messages), len(result), removed
        )
        await emit_event(self.event_callback, event)
        return result

    def _thinned(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """In a planned pruning, superseded and older bulky outputs are thinned first (see `thin_outputs`)."""
        if self.cache_policy is None or not self.cache_policy.thin:
            return messages
        return thin_outputs(messages, max_chars=self.cache_policy.thin_chars)

    # -- internals -----------------------------------------------------------------------------------------------

    async def _message_counts(self, messages: Sequence[ModelMessage]) -> list[int]:
        if self.token_counter is count_tokens_approximately:
            return [_default_counter.count_message(m) for m in messages]  # cached per message
        return [await async_count_tokens(self.token_counter, [m]) for m in messages]

    def _score(self, messages: Sequence[ModelMessage], units: list[Unit], counts: list[int]) -> list[ImportanceScore]:
        protected = _protected_indices(messages)
        predicate = self.keep_predicate

        def must_keep(unit: Unit) -> bool:
            if not _contiguous(unit.indices) or any(i in protected for i in unit.indices):
                return True
            return predicate is not None and any(predicate(messages[i]) for i in unit.indices)

        position = {id(m): i for i, m in enumerate(messages)}
        scores = score_units(
            messages,
            units,
            weights=self.weights,
            state_change_tools=self.state_change_tools,
            tokens=lambda m: counts[position[id(m)]],
            must_keep=must_keep,
        )
        if self.protect_score is None:
            return scores
        threshold = self.protect_score
        return [replace(s, must_keep=True) if s.score >= threshold else s for s in scores]

    def _merge_similar(
        self, messages: Sequence[ModelMessage], units: list[Unit], scores: list[ImportanceScore], kept: list[bool]
    ) -> dict[int, int]:
        """Drop every tool exchange whose next unit is an identical exchange; returns {kept response: merged}."""
        merged: dict[int, int] = {}
        run_length = 0
        for u in range(len(units) - 1):
            current, following = units[u], units[u + 1]
            same = (
                current.has_calls
                and following.has_calls
                and not scores[u].must_keep
                and current.indices[-1] + 1 == following.indices[0]
                and isinstance(_kept_before(messages, kept, current.indices[0]), ModelRequest)
                and _signature(messages, current) == _signature(messages, following)
            )
            if not same:
                run_length = 0
                continue
            run_length += 1
            for i in current.indices:
                kept[i] = False
            merged[following.indices[0]] = run_length
        return merged


def _latest_todo_call(messages: Sequence[ModelMessage]) -> int | None:
    """The response that set the current todo list (a `write_todos`-style call), if any."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ModelResponse) and any(
            isinstance(p, ToolCallPart) and todo_items(p) is not None for p in message.parts
        ):
            return i
    return None


def _protected_indices(messages: Sequence[ModelMessage]) -> set[int]:
    """The first instructions, the latest user request, the latest exchange, the current todo list (the call that
    set it: its unit keeps its results), and every summary."""
    first_response = next((i for i, m in enumerate(messages) if isinstance(m, ModelResponse)), len(messages))
    last_response = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], ModelResponse)), 0)
    protected = set(range(first_response)) | set(range(last_response, len(messages)))
    latest = latest_user_request_at(messages)
    if latest is not None:
        protected.add(latest)
    todos = _latest_todo_call(messages)
    if todos is not None:
        protected.add(todos)
    protected.update(i for i, m in enumerate(messages) if is_summary_message(m))
    return protected


def _kept_before(messages: Sequence[ModelMessage], kept: list[bool], i: int) -> ModelMessage | None:
    j = i - 1
    while j >= 0 and not kept[j]:
        j -= 1
    return messages[j] if j >= 0 else None


def _contiguous(indices: tuple[int, ...]) -> bool:
    return indices[-1] - indices[0] == len(indices) - 1


def _drop_lowest(
    messages: Sequence[ModelMessage], scores: list[ImportanceScore], kept: list[bool], excess: int
) -> None:
    """Drop units lowest score first (older first on ties) while `excess` tokens remain over the target. A unit is
    skipped when dropping it would put two responses side by side."""
    previous = list(range(-1, len(messages) - 1))  # a linked list over the kept messages
    following = list(range(1, len(messages) + 1))
    for i in (i for i, k in enumerate(kept) if not k):  # already merged away
        _unlink(previous, following, i)
    candidates = sorted((s for s in scores if not s.must_keep and kept[s.indices[0]]), key=lambda s: s.score)
    for score in candidates:
        if excess <= 0:
            return
        before, after = previous[score.indices[0]], following[score.indices[-1]]
        if before < 0 or after >= len(messages):
            continue
        if isinstance(messages[before], ModelResponse) and isinstance(messages[after], ModelResponse):
            continue
        for i in score.indices:
            kept[i] = False
            _unlink(previous, following, i)
        excess -= score.tokens


def _unlink(previous: list[int], following: list[int], i: int) -> None:
    before, after = previous[i], following[i]
    if before >= 0:
        following[before] = after
    if after < len(following):
        previous[after] = before


def _signature(messages: Sequence[ModelMessage], unit: Unit) -> str:
    """The tools called and what they returned, digits and spacing aside (a clock or a counter differs)."""
    pieces: list[str] = []
    for i in unit.indices:
        for part in messages[i].parts:
            if isinstance(part, ToolCallPart):
                pieces.append("call:" + part.tool_name)
            elif isinstance(part, ToolReturnPart):
                text = _SPACE.sub(" ", _DIGITS.sub("0", part_text(part)))
                pieces.append(f"return:{part.tool_name}:{part.outcome}:{text}")
    return hashlib.blake2b("\n".join(pieces).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _annotated(message: ModelMessage, merged: int) -> ModelMessage:
    if not merged:
        return message
    return replace(message, metadata={**(message.metadata or {}), MERGED_METADATA_KEY: merged})
