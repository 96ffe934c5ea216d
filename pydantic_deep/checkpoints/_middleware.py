"""`CheckpointMiddleware`: automatic and named checkpoints of a run's history, and `rewind` to one of them."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    ToolReturnPart,
)
from pydantic_ai.models import ModelRequestContext

from summarization_pydantic_ai import ensure_message_id
from summarization_pydantic_ai.store import HistoryDatabase

from ..sessions._history import ForkPointError, history_at, history_in_records
from ._protocol import CheckpointStore
from ._store import Checkpoint, CheckpointError, FileCheckpointStore, validate_checkpoint_id

__all__ = ["CheckpointMiddleware"]

logger = logging.getLogger("pydantic_deep.checkpoints")

StoreSource = CheckpointStore | Callable[[RunContext[Any]], CheckpointStore | None] | None
Every = Literal["turn", "tool_call", "off"]


def _after_tools(messages: Sequence[ModelMessage]) -> bool:
    """The history ends with the results of a round of tool calls (a consistent point to come back to)."""
    last = messages[-1] if messages else None
    return isinstance(last, ModelRequest) and any(
        isinstance(p, ToolReturnPart) or (isinstance(p, RetryPromptPart) and p.tool_name is not None)  # pyright: ignore[reportDeprecated]
        for p in last.parts
    )


def _awaits_results(messages: Sequence[ModelMessage]) -> bool:
    return bool(messages) and isinstance(messages[-1], ModelResponse) and bool(messages[-1].tool_calls)


@dataclass
class CheckpointMiddleware(AbstractCapability[Any]):
    """Checkpoints of the history as pointers (message ids) into the session's history store.

    - `every='turn'`: one automatic checkpoint at the end of each run (the history you continue from with your
      next prompt).
    - `every='tool_call'`: also one after each round of tool calls (before the model request that reads their
      results: the history then ends with the results, a valid point to resume from).
    - `every='off'`: only the checkpoints you take with `checkpoint(messages, name)`.

    The automatic ones beyond the newest `keep` are pruned; named ones stay until deleted. `rewind(id)` returns
    the history at a checkpoint, read from the history file (so the middleware needs the session's history
    store: `ContextManagerMiddleware`, as `create_deep_agent` adds by default).

    Example:
        ```python
        checkpoints = CheckpointMiddleware(every='tool_call')
        agent = create_deep_agent(model, capabilities=[checkpoints])
        ```
    """

    store: StoreSource = None
    """A `FileCheckpointStore` (or any `CheckpointStore`, e.g. `storage.checkpoints(session_id)`), a function of the
    `RunContext` returning one, or `None` for the run's session directory (`<base_dir>/sessions/<id>/checkpoints.json`
    with `DeepAgentDeps`; no checkpoints without one)."""
    history: HistoryDatabase | None = None
    """Where `rewind` reads the history when the checkpoints are not in a session folder beside messages.json
    (a database `Storage`: `storage.history`)."""
    every: Every = "turn"
    keep: int = 50
    """Automatic checkpoints kept per session (the oldest are pruned)."""
    fsync: bool = False
    """For the default store: flush `checkpoints.json` to disk before the rename (see `FileCheckpointStore`)."""
    _last_store: CheckpointStore | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.every not in ("turn", "tool_call", "off"):
            raise ValueError(f"every must be 'turn', 'tool_call' or 'off', got {self.every!r}")
        if self.keep < 1:
            raise ValueError(f"keep must be >= 1, got {self.keep!r}")

    # -- public API -----------------------------------------------------------------------------------------------

    @property
    def checkpoint_store(self) -> CheckpointStore | None:
        """The store `checkpoint` and `rewind` use: `store` when it is one, else the latest run's."""
        return self.store if isinstance(self.store, CheckpointStore) else self._last_store

    async def checkpoint(self, messages: Sequence[ModelMessage], name: str | None = None) -> Checkpoint:
        """Save a checkpoint of `messages` (a run's history: `result.all_messages()`) now, named or not.
        The last message gets an id if it has none; it must be recorded in the session's history to rewind.
        A history that ends with tool calls waiting for their results is refused (`ForkPointError`): it is no
        point to come back to."""
        if _awaits_results(messages):
            raise ForkPointError("the history ends with tool calls waiting for their results; checkpoint after them")
        return await self._take(self._require_store(), messages, name, auto=False)

    async def rewind(self, checkpoint_id: str) -> list[ModelMessage]:
        """The history at checkpoint `checkpoint_id`, from the history store: the original messages up to its
        message when no compaction happened before it, else the working context as it was then. Pass it as
        `message_history`; to continue from it in a file of its own, fork the session at
        `checkpoint.message_id` (`SessionManager.rewind`). The id is validated first: `'../evil'` is refused
        with `InvalidCheckpointIdError`; an unknown one raises `CheckpointNotFoundError`."""
        validate_checkpoint_id(checkpoint_id)
        store = self._require_store()
        checkpoint = await anyio.to_thread.run_sync(store.get, checkpoint_id)
        if checkpoint.message_id is None:
            return []
        if isinstance(store, FileCheckpointStore):
            return await anyio.to_thread.run_sync(
                history_at, store.session_dir / "messages.json", checkpoint.message_id
            )
        return await self._history_at(store.session_id, checkpoint.message_id)

    async def _history_at(self, session_id: str, message_id: str) -> list[ModelMessage]:
        if self.history is None:
            raise CheckpointError("rewind needs the history: pass CheckpointMiddleware(history=storage.history)")
        records = await self.history.session(session_id).load_all()
        return history_in_records(records, message_id, f"session {session_id!r} of {self.history.url}")

    # -- capability hooks -----------------------------------------------------------------------------------------

    async def before_run(self, ctx: RunContext[Any]) -> None:
        self._last_store = self._store_for(ctx)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        if self.every == "tool_call" and _after_tools(ctx.messages):
            await self._auto(ctx, ctx.messages)
        return request_context

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        if self.every != "off":
            await self._auto(ctx, result.all_messages())
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    # -- internals ------------------------------------------------------------------------------------------------

    def _store_for(self, ctx: RunContext[Any]) -> CheckpointStore | None:
        if isinstance(self.store, CheckpointStore):
            return self.store
        if self.store is not None:
            return self.store(ctx)
        session_dir = getattr(ctx.deps, "session_dir", None)  # DeepAgentDeps; None when nothing is kept on disk
        return FileCheckpointStore(session_dir, fsync=self.fsync) if isinstance(session_dir, Path) else None

    def _require_store(self) -> CheckpointStore:
        store = self.checkpoint_store
        if store is None:
            raise CheckpointError(
                "no checkpoint store: pass CheckpointMiddleware(store=FileCheckpointStore(session_dir)), or run "
                "the agent once with DeepAgentDeps that keep a session on disk"
            )
        return store

    async def _auto(self, ctx: RunContext[Any], messages: Sequence[ModelMessage]) -> None:
        """An automatic checkpoint; a failure to write it is logged, never fails the run."""
        store = self._store_for(ctx)
        if store is None or not messages or _awaits_results(messages):
            return  # nothing to point at, or a run that ended waiting for tool results (deferred calls)
        try:
            await self._take(store, messages, None, auto=True)
        except CheckpointError as exc:
            logger.warning("automatic checkpoint skipped: %s", exc)

    async def _take(
        self, store: CheckpointStore, messages: Sequence[ModelMessage], name: str | None, *, auto: bool
    ) -> Checkpoint:
        checkpoint = Checkpoint(
            id=uuid.uuid4().hex[:12],
            session_id=store.session_id,
            name=name,
            message_id=ensure_message_id(messages[-1]) if messages else None,
            message_count=len(messages),
            created=datetime.now(UTC),
            auto=auto,
        )
        await anyio.to_thread.run_sync(self._save, store, checkpoint)
        return checkpoint

    def _save(self, store: CheckpointStore, checkpoint: Checkpoint) -> None:
        store.save(checkpoint)
        if checkpoint.auto:
            store.prune(self.keep)
