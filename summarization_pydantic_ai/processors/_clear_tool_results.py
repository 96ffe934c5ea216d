"""`ClearToolResultsProcessor`: the zero-LLM tier. Old tool results become short placeholders, in batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from .._cache_policy import CachePolicy
from .._events import EventCallback, ToolResultsCleared, emit_event
from .._render import part_text
from .._sizes import ContextSize, Measure, normalize_trigger
from .._tokens import TokenCounter, count_tokens_approximately, estimate_text_tokens
from ._base import HistoryProcessor, RunInfo, check_counter, measure, resolve_budget

__all__ = ["CLEARED_METADATA_KEY", "ClearToolResultsProcessor"]

CLEARED_METADATA_KEY = "summarization_pydantic_ai.cleared"
"""Set in a cleared `ToolReturnPart.metadata`: the original size, so a cleared result is never cleared twice."""

DEFAULT_PLACEHOLDER = (
    "[Tool result cleared to save context: {tool_name} (call {tool_call_id}), about {tokens} tokens. "
    "Call the tool again if you need it.]"
)


def _metadata(part: ToolReturnPart) -> dict[str, Any]:
    metadata: Any = part.metadata
    return dict(cast(dict[str, Any], metadata)) if isinstance(metadata, dict) else {}


def _is_cleared(part: ToolReturnPart) -> bool:
    return CLEARED_METADATA_KEY in _metadata(part)


@dataclass
class ClearToolResultsProcessor(HistoryProcessor):
    """Replace the content of all but the last `keep_last` tool results with a placeholder naming the call.

    Clearing happens in batches: only once at least `clear_at_least` tokens can be reclaimed, and then every
    eligible result at once. Between batches the history's prefix does not change, so a provider prompt cache
    stays valid. The call and its (now short) result stay paired; cleared results are marked and never
    cleared again. With a `trigger`, nothing is cleared until the history reaches it.

    Example:
        ```python
        clearing = ClearToolResultsProcessor(keep_last=3, clear_at_least=5_000)
        agent = Agent('anthropic:claude-sonnet-4-5', capabilities=[clearing])
        ```
    """

    keep_last: int = 3
    clear_at_least: int = 2_000
    """Minimum tokens one batch must reclaim."""
    trigger: Any = None
    exclude_tools: Sequence[str] = ()
    """Tool names whose results are never cleared."""
    placeholder: str = DEFAULT_PLACEHOLDER
    """May use `{tool_name}`, `{tool_call_id}` and `{tokens}`."""
    max_tokens: int | None = None
    model_name: str | None = None
    token_counter: TokenCounter = count_tokens_approximately
    event_callback: EventCallback | None = None
    cache_policy: CachePolicy | None = None
    """Clear by what it costs with the prompt cache counted: a batch waits until the request reaches where the
    clearing pays for its cache re-write (see `CachePolicy`; from `trigger` on, at the latest at the policy's
    limit of the budget: set `max_tokens` or `model_name`)."""
    _triggers: tuple[ContextSize, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.keep_last < 0:
            raise ValueError(f"keep_last must be >= 0, got {self.keep_last}")
        if self.clear_at_least < 0:
            raise ValueError(f"clear_at_least must be >= 0, got {self.clear_at_least}")
        self._triggers = normalize_trigger(self.trigger)
        check_counter(self.token_counter)
        try:
            self.placeholder.format(tool_name="t", tool_call_id="c", tokens=1)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"placeholder may only use {{tool_name}}, {{tool_call_id}}, {{tokens}}: {exc}") from exc

    def _placeholder(self, part: ToolReturnPart, tokens: int) -> str:
        return self.placeholder.format(tool_name=part.tool_name, tool_call_id=part.tool_call_id, tokens=tokens)

    async def process(self, messages: list[ModelMessage], run: RunInfo | None) -> list[ModelMessage]:
        size: Measure | None = None
        if self._triggers or self.cache_policy is not None:
            needs_budget = self.cache_policy is not None or any(s[0] == "fraction" for s in self._triggers)
            budget = resolve_budget(self.max_tokens, self.model_name, 0, run, needs_budget)
            size = await measure(messages, self.token_counter, run, budget, None)
            if self.cache_policy is None and not any(size.reaches(t) for t in self._triggers):
                return messages
        candidates = self._candidates(messages)
        reclaim = sum(
            tokens - estimate_text_tokens(self._placeholder(part, tokens)) for _, _, part, tokens in candidates
        )
        if not candidates or reclaim < self.clear_at_least or reclaim <= 0:
            return messages
        if size is not None and not self._planned(messages, size, reclaim):
            return messages
        result = list(messages)
        by_message: dict[int, dict[int, ToolReturnPart]] = {}
        for i, j, part, tokens in candidates:
            metadata = {**_metadata(part), CLEARED_METADATA_KEY: {"tokens": tokens}}
            by_message.setdefault(i, {})[j] = replace(part, content=self._placeholder(part, tokens), metadata=metadata)
        for i, replacements in by_message.items():
            message = result[i]
            assert isinstance(message, ModelRequest)
            parts = [replacements.get(j, p) for j, p in enumerate(message.parts)]
            result[i] = replace(message, parts=parts)
        ids = tuple(part.tool_call_id for _, _, part, _ in candidates)
        await emit_event(self.event_callback, ToolResultsCleared(type(self).__name__, len(candidates), reclaim, ids))
        return result

    def _planned(self, messages: list[ModelMessage], size: Measure, reclaim: int) -> bool:
        """With a policy: whether a batch reclaiming `reclaim` tokens is due now (from the first trigger on)."""
        if self.cache_policy is None:
            return True
        kept: ContextSize = ("tokens", max(size.tokens - reclaim, 0))
        triggers = self._triggers or (("tokens", 0),)
        return any(self.cache_policy.due(messages, size, t, kept) for t in triggers)

    def _candidates(self, messages: Sequence[ModelMessage]) -> list[tuple[int, int, ToolReturnPart, int]]:
        """Uncleared tool results older than the last `keep_last`, with their estimated size."""
        returns: list[tuple[int, int, ToolReturnPart]] = []
        for i, message in enumerate(messages):
            if isinstance(message, ModelRequest):
                returns.extend((i, j, part) for j, part in enumerate(message.parts) if isinstance(part, ToolReturnPart))
        old = returns[: max(len(returns) - self.keep_last, 0)]
        excluded = set(self.exclude_tools)
        return [
            (i, j, part, estimate_text_tokens(part_text(part)))
            for i, j, part in old
            if not _is_cleared(part) and part.tool_name not in excluded
        ]
