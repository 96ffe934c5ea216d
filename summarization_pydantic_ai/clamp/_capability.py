"""The capability: clamp each new message's oversized parts once, and keep the originals in a history store."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage

from .._events import EventCallback
from .._sizes import ContextSize
from ..context_manager._clamp import (
    PART_KINDS,
    NewMessages,
    PartKind,
    check_clamp_settings,
    clamp_new_parts,
    clamp_sizes,
    clampable_tokens,
    part_kind,
)
from ..context_manager._state import RunState, record_new_messages
from ..processors._base import HistoryProcessor, RunInfo, resolve_budget
from ..store import HistoryStore, ensure_message_id

__all__ = ["ClampOversizedParts"]

logger = logging.getLogger("summarization_pydantic_ai")

StoreSource = HistoryStore | Callable[[RunContext[Any]], HistoryStore | None] | None


@dataclass
class ClampOversizedParts(HistoryProcessor):
    """Cut every part above `max_part_tokens` to its head and tail (about `clamp_to_tokens`), with a marker that
    names where the original is kept: one runaway generation, one giant `write_file` call or one pasted document
    can no longer push every later request over the window.

    A part is clamped once, when it first enters the history, so the prefix a provider has cached is never
    rewritten. Only the part's content changes (parts keep their place, kind and tool call id): pair-safe, and
    valid for every provider, since arguments stay a JSON object. With a `history_store` (the one the middleware
    records in), the original message is recorded there before the clamped copy replaces it, and the marker names
    its id: `store.read(id, id)` returns it verbatim. System prompts, summaries, thinking (signed by the provider),
    provider-executed tools, media and framework-typed tool parts are never cut.

    Example:
        ```python
        clamp = ClampOversizedParts(max_part_tokens=50_000, history_store=middleware.store)
        agent = Agent('openai:gpt-4.1', capabilities=[clamp, middleware])
        ```
    """

    max_part_tokens: Any = 50_000
    """A part's limit: an `int` of tokens, `("tokens", n)`, or `("fraction", f)` of the token budget."""
    clamp_to_tokens: int | None = None
    """About what a clamped part keeps (60% head, 40% tail); default: a tenth of the limit, at least 128."""
    kinds: Sequence[PartKind] = PART_KINDS
    """The parts that may be cut: `text` (responses), `tool_call_args`, `tool_return`, `user_prompt`,
    `retry_prompt`."""
    history_store: StoreSource = None
    """Where the originals are recorded (a `HistoryStore`, or a function of the `RunContext` returning one); without
    one the marker says the original was not stored."""
    history_tool: bool = False
    """The agent has the `read_history` tool (`expose_history_tool=True` on the middleware): the marker shows the
    call that reads the original back."""
    max_tokens: int | None = None
    model_name: str | None = None
    reserve_output_tokens: int = 0
    event_callback: EventCallback | None = None
    """Receives `PartsClamped(parts)` after each call that cut something."""
    _limit: ContextSize = field(init=False, repr=False)
    _seen: NewMessages = field(default_factory=NewMessages, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        limit = check_clamp_settings(self.max_part_tokens, self.clamp_to_tokens)
        if limit is None:
            raise ValueError("max_part_tokens is required: an int of tokens, ('tokens', n) or ('fraction', f)")
        self._limit = limit
        if isinstance(self.kinds, str):
            raise TypeError(f"kinds must be a sequence of part kinds, e.g. ('text',), not a string: {self.kinds!r}")
        self.kinds = tuple(self.kinds)
        unknown = [k for k in self.kinds if k not in PART_KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"kinds: {unknown or 'none given'!r}; use some of {', '.join(PART_KINDS)}")
        store = self.history_store
        if store is not None and not isinstance(store, HistoryStore) and not callable(store):
            raise TypeError(f"history_store must be a HistoryStore or a function of the RunContext, got {store!r}")
        if self.reserve_output_tokens < 0:
            raise ValueError(f"reserve_output_tokens must be >= 0, got {self.reserve_output_tokens}")

    async def process(self, messages: list[ModelMessage], run: RunInfo | None) -> list[ModelMessage]:
        start = self._seen.start(messages)
        if start == len(messages):
            return messages
        budget = resolve_budget(
            self.max_tokens, self.model_name, self.reserve_output_tokens, run, self._limit[0] == "fraction"
        )
        limit, keep = clamp_sizes(self._limit, self.clamp_to_tokens, budget)
        store = self._store(run)
        if store is not None and self._oversized(messages[start:], limit):
            for message in messages[start:]:
                ensure_message_id(message)  # before the cut, so the marker can name it
            try:
                await record_new_messages(RunState(), messages, store)  # the originals, in order, before the cut
            except Exception:
                logger.exception("recording the originals failed; no part is clamped this time")
                return messages
        return await clamp_new_parts(
            messages,
            self._seen,
            limit,
            keep,
            processor=type(self).__name__,
            event_callback=self.event_callback,
            kinds=self.kinds,
            history_tool=self.history_tool,
        )

    def _oversized(self, messages: Sequence[ModelMessage], limit: int) -> bool:
        return any(
            part_kind(part) in self.kinds and clampable_tokens(part) > limit
            for message in messages
            for part in message.parts
        )

    def _store(self, run: RunInfo | None) -> HistoryStore | None:
        if isinstance(self.history_store, HistoryStore) or self.history_store is None:
            return self.history_store
        return self.history_store(run.ctx) if run is not None else None
