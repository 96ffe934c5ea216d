"""`PhaseCheckpoints`: when a phase is done, rebuild the context as the instructions plus one checkpoint message."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestContext

from .._cache_policy import CachePolicy
from .._compaction import shrinks
from .._events import ContextReduced, EventCallback, PhaseCheckpointed, emit_event
from .._messages import get_message_id, summary_info
from .._sizes import Measure
from .._tokens import TokenCounter, async_count_tokens, count_tokens_approximately
from ..context_manager._compress import link_summary
from ..context_manager._state import RunState, record_new_messages
from ..processors._base import check_counter
from ..processors._summary_plan import new_problems
from ..store import HistoryPage, HistoryStore, HistoryStoreError, ensure_message_id
from ._checkpoint import CompletedPhase, Rebuild, plan_rebuild
from ._toolset import phase_toolset

__all__ = ["PhaseCheckpoints"]

logger = logging.getLogger("summarization_pydantic_ai")

NAME = "PhaseCheckpoints"
StoreSource = HistoryStore | Callable[[RunContext[Any]], HistoryStore | None] | None


@dataclass
class PhaseCheckpoints(AbstractCapability[Any]):
    """Rebuild the context at phase boundaries: the original instructions, one checkpoint message, the current phase.

    The application calls `mark_done(name, state=..., objectives=[...])` when a phase of the task is done (login,
    cart, checkout), or the model calls the `complete_phase` tool this capability provides. At the next model
    request the history becomes the original instructions (the requests before the first response) plus a
    checkpoint message listing every completed phase with its state and objectives, followed by the current
    phase (a new prompt, or a pending tool exchange). A checkpoint that would not make the context smaller (a
    phase of a few short messages) is not built: its phases stay pending and join the next one. The completed
    phases' messages leave the working context but are not lost: with a `history_store` they are recorded there
    first (the checkpoint is a record listing their ids, like a summary, so `store.load()` resumes from it and
    `read_phase(name)` returns them verbatim); without one they are kept in memory.

    Also usable as a plain history processor (`await phases(messages)`, `ProcessHistory(phases)`), applying the
    phases marked done since the previous call.

    Example:
        ```python
        store = JsonHistoryStore.open('.sessions/shop/messages.json')
        phases = PhaseCheckpoints(history_store=store, phases=['login', 'cart', 'checkout'])
        agent = Agent('openai:gpt-4.1', capabilities=[phases, ContextManagerMiddleware(history_store=store)])
        ```
    """

    history_store: StoreSource = None
    """Where archived messages are recorded: a store (share the middleware's), or a function of the run context
    returning one; `None` keeps them in memory (`read_phase` still returns them)."""
    phases: Sequence[str] | None = None
    """The phase names in order, when known: `mark_done` refuses other names and the checkpoint names the next one."""
    expose_tool: bool = True
    """Give the model a `complete_phase(name, objectives, state)` tool that marks a phase done."""
    tool_name: str = "complete_phase"
    token_counter: TokenCounter = count_tokens_approximately
    event_callback: EventCallback | None = None
    cache_policy: CachePolicy | None = None
    """Rebuild by what it costs with the prompt cache counted: the phases marked done wait for the request where
    the rebuild pays for its cache re-write (see `CachePolicy`; at the latest the policy's limit of `max_tokens`),
    so that several phases and the growth between them cost one re-write. `None`: rebuild at the next request."""
    max_tokens: int | None = None
    """The budget the policy's limit refers to (the context window minus the output reserve)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    _pending: list[CompletedPhase] = field(default_factory=list[CompletedPhase], init=False, repr=False)
    _completed: list[CompletedPhase] = field(default_factory=list[CompletedPhase], init=False, repr=False)
    _deferred: int = field(default=0, init=False, repr=False)
    """How many phases were pending when a checkpoint was last deferred (it would not have made the context
    smaller): they wait for the next phase marked done instead of being retried at every request."""
    _archives: dict[str, HistoryStore | list[ModelMessage]] = field(
        default_factory=dict[str, "HistoryStore | list[ModelMessage]"], init=False, repr=False
    )
    """Per checkpoint id: the store its archived messages were recorded in, or the messages (without a store)."""

    def __post_init__(self) -> None:
        if self.phases is not None:
            if isinstance(self.phases, str):
                raise TypeError("phases must be a sequence of names, e.g. ['login', 'cart'], not a string")
            self.phases = tuple(_check_name(p) for p in self.phases)
            if len(set(self.phases)) != len(self.phases):
                raise ValueError(f"phase names must be unique, got {list(self.phases)}")
        if not self.tool_name.isidentifier():
            raise ValueError(f"tool_name must be a valid identifier, got {self.tool_name!r}")
        check_counter(self.token_counter)

    # -- public API ----------------------------------------------------------------------------------------------

    def mark_done(self, name: str, *, state: Any = None, objectives: Sequence[str] = ()) -> CompletedPhase:
        """Mark phase `name` done; the context is rebuilt at the next model request (or plain call).

        Args:
            name: the phase (one of `phases`, when declared).
            state: what the phase established, JSON-compatible (a dict, a list, a string...): the checkpoint
                carries it verbatim.
            objectives: the objectives the phase completed, one line each.

        Raises:
            ValueError: an empty name, a name not in `phases`, a phase already marked done and not yet
                checkpointed, or a phase of `phases` already completed.
            TypeError: `state` is not JSON-compatible, or `objectives` is not a sequence of strings.
        """
        name = _check_name(name)
        if self.phases is not None and name not in self.phases:
            raise ValueError(f"unknown phase {name!r}: expected one of {list(self.phases)}")
        if isinstance(objectives, str) or not all(isinstance(o, str) for o in objectives):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"objectives must be a sequence of strings, got {objectives!r}")
        try:
            json.dumps(state)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"state must be JSON-compatible (dicts, lists, strings, numbers): {exc}") from exc
        phase = CompletedPhase(name, state, tuple(objectives))
        with self._lock:
            if any(p.name == name for p in self._pending):
                raise ValueError(f"phase {name!r} is already marked done (its checkpoint is pending)")
            if self.phases is not None and any(p.name == name for p in self._completed):
                raise ValueError(f"phase {name!r} is already completed")
            self._pending.append(phase)
        return phase

    @property
    def pending(self) -> tuple[CompletedPhase, ...]:
        """Phases marked done whose checkpoint has not been built yet."""
        with self._lock:
            return tuple(self._pending)

    @property
    def completed(self) -> tuple[CompletedPhase, ...]:
        """Phases checkpointed through this instance, in order, with the ids they archived."""
        with self._lock:
            return tuple(self._completed)

    async def read_phase(self, name: str, *, offset: int = 0, limit: int = 50) -> HistoryPage:
        """The archived messages of a completed phase, verbatim and paged (from the store, or from memory)."""
        phase = next((p for p in reversed(self.completed) if p.name == name), None)
        if phase is None:
            raise ValueError(f"no completed phase named {name!r}: completed {[p.name for p in self.completed]}")
        archive = self._archives.get(phase.checkpoint_id or "")
        if archive is None and not callable(self.history_store):
            archive = self.history_store  # a phase of a resumed history: its messages are in the store
        if isinstance(archive, list):
            end = offset + limit
            return HistoryPage(archive[offset:end], len(archive), offset, end if end < len(archive) else None)
        if archive is None or not phase.archived_ids:
            raise HistoryStoreError(f"the messages of phase {name!r} are not in this instance's history store")
        return await archive.read(phase.archived_ids[0], phase.archived_ids[-1], offset=offset, limit=limit)

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Plain history-processor form: apply the phases marked done since the previous call."""
        if callable(self.history_store):
            raise TypeError("a history_store function needs a run context: pass a store to use the plain form")
        return await self._apply(messages, self.history_store)

    # -- capability hooks ----------------------------------------------------------------------------------------

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        store = self.history_store(ctx) if callable(self.history_store) else self.history_store
        messages = request_context.messages
        result = await self._apply(messages, store)
        if result is not messages:
            ctx.messages[:] = result
            request_context.messages = list(result)
        return request_context

    def get_toolset(self) -> Any:
        if not self.expose_tool:
            return None
        return phase_toolset(self)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    # -- internals -----------------------------------------------------------------------------------------------

    async def _apply(self, messages: list[ModelMessage], store: HistoryStore | None) -> list[ModelMessage]:
        with self._lock:
            pending = list(self._pending)
        if len(pending) <= self._deferred or not messages:
            return messages
        try:
            for message in messages:  # ids first: the checkpoint lists the archived messages by id
                ensure_message_id(message)
            rebuild = plan_rebuild(messages, pending, tool_name=self.tool_name, declared=self.phases)
            if not await self._due(messages, rebuild.result):
                return messages
            problems = new_problems(messages, rebuild.result)
            if problems:
                raise RuntimeError(f"the rebuilt history would be invalid: {problems}")
            if not shrinks(messages, rebuild.result):
                # A checkpoint larger than what it archives would grow the context: the phases stay pending and
                # join the checkpoint of the next phase marked done.
                logger.debug("phase checkpoint deferred: it would not make the history smaller")
                self._deferred = len(pending)
                return messages
            await self._archive(messages, rebuild, store, len(pending))
        except Exception:
            logger.exception("phase checkpoint failed; the history is left as it was (the phases stay pending)")
            return messages
        with self._lock:
            done = {id(p) for p in pending}
            self._pending = [p for p in self._pending if id(p) not in done]
            self._deferred = 0
            self._completed = _of_checkpoint(rebuild)  # earlier checkpoints' phases included (a resumed history)
        await self._report(messages, rebuild, pending)
        return rebuild.result

    async def _due(self, messages: list[ModelMessage], rebuilt: list[ModelMessage]) -> bool:
        """Without a policy, at once; with one, when the rebuild from `messages` to `rebuilt` pays."""
        if self.cache_policy is None:
            return True
        size = Measure(len(messages), await async_count_tokens(self.token_counter, messages), self.max_tokens)
        after = await async_count_tokens(self.token_counter, rebuilt)
        return self.cache_policy.due(messages, size, ("tokens", after), ("tokens", after))

    async def _archive(
        self, messages: list[ModelMessage], rebuild: Rebuild, store: HistoryStore | None, new: int
    ) -> None:
        """Record every message, then the checkpoint (the commit: the working history changes only after both)."""
        link_summary(rebuild.result, rebuild.checkpoint)
        checkpoint_id = get_message_id(rebuild.checkpoint)
        info = summary_info(rebuild.checkpoint) or {}
        for entry in info.get("phases", [])[-new:]:
            entry["checkpoint_id"] = checkpoint_id
        if store is not None:
            await record_new_messages(RunState(), messages, store)
            await store.append([rebuild.checkpoint])
        self._archives[checkpoint_id or ""] = store if store is not None else list(rebuild.archived)

    async def _report(self, messages: list[ModelMessage], rebuild: Rebuild, pending: list[CompletedPhase]) -> None:
        before = await async_count_tokens(self.token_counter, messages)
        after = await async_count_tokens(self.token_counter, rebuild.result)
        ids = tuple(i for i in map(get_message_id, rebuild.archived) if i)
        checkpoint_id = get_message_id(rebuild.checkpoint)
        objectives = tuple(o for p in pending for o in p.objectives)
        event = PhaseCheckpointed(
            NAME,
            tuple(p.name for p in pending),
            objectives,
            len(rebuild.archived),
            before,
            after,
            checkpoint_id,
            ids[0] if ids else None,
            ids[-1] if ids else None,
        )
        await emit_event(self.event_callback, event)
        reduced = ContextReduced(NAME, "checkpoint", before, after, len(messages), len(rebuild.result), ids)
        await emit_event(self.event_callback, reduced)


def _of_checkpoint(rebuild: Rebuild) -> list[CompletedPhase]:
    """The completed phases as the checkpoint message records them (with their archive and checkpoint ids)."""
    info = summary_info(rebuild.checkpoint) or {}
    raw: list[Any] = info.get("phases", [])
    return [p for p in map(CompletedPhase.from_json, raw) if p is not None]


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a phase name must be a non-empty string, got {name!r}")
    return name.strip()
