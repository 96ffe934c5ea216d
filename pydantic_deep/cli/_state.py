"""The chat's state: the session, its deps, the agent built on them, and the working history in memory.

A new chat creates its session at once (after every check passed) and removes it again when it is left without a
message. Switching session (`/fork`, `/rewind`) rebuilds the agent over the other session's files; the model stays.

On a database store (`--store sqlite:///...`, `postgresql://...`) the history is recorded in the database through a
handle of the chat's own (`writer`): what it has read of its session is what the chat shows, so another worker's
appends are noticed (`HistoryStoreConflictError`) rather than silently read by a listing or a search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage

from summarization_pydantic_ai import (
    ContextEvent,
    ContextManagerMiddleware,
    ContextMetrics,
    CostTotals,
    CostTrackingMiddleware,
    HistoryStore,
    JsonHistoryStore,
    get_message_id,
    validate_session_id,
)

from ..checkpoints import CheckpointMiddleware, FileCheckpointStore
from ..deps import DeepAgentDeps
from ..eviction import EvictionProcessor
from ..sessions import SessionInfo, SessionManager, SessionNotFoundError
from ..storage import Storage
from ._errors import CliError
from ._models import ResolvedModel
from ._ui import Ui

__all__ = ["KEEP_MESSAGES", "ChatState", "existing_session", "existing_stored_session"]

KEEP_MESSAGES = 4
"""Messages a compaction keeps verbatim after the summary (the latest exchanges)."""
_EVICTION_LIMIT = 20_000


def existing_session(manager: SessionManager, session_id: str) -> SessionInfo:
    """The session `session_id`, or a one-line `CliError`: a bad id, no such session, or a damaged history file
    (refused before anything opens it for writing, which would repair it)."""
    session_id = validate_session_id(session_id)
    try:
        info = manager.get(session_id)
    except SessionNotFoundError:
        raise CliError(
            f"no session {session_id!r} in {manager.sessions_dir}; pydantic-deep sessions lists them"
        ) from None
    if info.error:
        raise CliError(f"session {info.id!r} cannot be read, nothing was changed: {info.error}")
    if info.messages_path.is_file():  # else created, never run: an empty history
        report = JsonHistoryStore.reader(info.messages_path).verify()
        if not report.ok:
            raise CliError(f"session {info.id!r} is damaged, nothing was changed: {report.describe()}")
    return info


async def existing_stored_session(manager: SessionManager, session_id: str) -> SessionInfo:
    """`existing_session` on a database store: the same one-line errors."""
    session_id = validate_session_id(session_id)
    try:
        return await manager.get_async(session_id)
    except SessionNotFoundError:
        raise CliError(
            f"no session {session_id!r} in {manager.location}; pydantic-deep sessions --store URL lists them"
        ) from None


@dataclass
class ChatState:
    manager: SessionManager
    resolved: ResolvedModel
    workdir: Path
    ui: Ui
    session_id: str | None = None
    """The session to continue (`None`: a new one)."""
    history: list[ModelMessage] = field(default_factory=list[ModelMessage])
    measured: bool = False
    """Whether the middleware's latest measurement is of this history (not before a /compact, /fork, ...)."""
    max_cost: Decimal | None = None
    """`--max-cost`: the session's budget in US dollars (`session_max_cost_usd`)."""
    writer: Storage | None = None
    """With a database store: the chat's own handle on it, which records the history (`None`: messages.json)."""
    new: bool = field(init=False, default=False)
    """A session this chat created (removed again if it is left without a message)."""
    deps: DeepAgentDeps = field(init=False)
    middleware: ContextManagerMiddleware = field(init=False)
    cost: CostTrackingMiddleware = field(init=False)
    metrics: ContextMetrics = field(init=False)
    """Requests, usage, reductions of this chat in this session (`/context` shows the summary)."""
    checkpoints: CheckpointMiddleware = field(init=False)
    agent: Agent[DeepAgentDeps, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.new = self.session_id is None
        if self.session_id is None:
            self.session_id = self.manager.create().id
        self._build()

    @classmethod
    async def start(
        cls,
        manager: SessionManager,
        resolved: ResolvedModel,
        workdir: Path,
        ui: Ui,
        *,
        writer: Storage | None = None,
        max_cost: Decimal | None = None,
    ) -> ChatState:
        """A chat in a new session (created without blocking: on a database store too)."""
        info = await manager.create_async()
        state = cls(manager, resolved, workdir, ui, session_id=info.id, max_cost=max_cost, writer=writer)
        state.new = True
        return state

    @classmethod
    async def resume(
        cls,
        manager: SessionManager,
        resolved: ResolvedModel,
        workdir: Path,
        ui: Ui,
        session_id: str,
        *,
        writer: Storage | None = None,
        max_cost: Decimal | None = None,
    ) -> ChatState:
        """The chat of an existing session: its working context loaded from its history."""
        state = cls(manager, resolved, workdir, ui, session_id=session_id, max_cost=max_cost, writer=writer)
        state.history = await state.load()
        return state

    # -- the session -----------------------------------------------------------------------------------------------

    @property
    def messages_path(self) -> Path:
        """The session's messages.json (with a database store: not written; see `where`)."""
        path = self.deps.messages_path
        assert path is not None  # the CLI's deps always keep their session on disk
        return path

    @property
    def history_store(self) -> HistoryStore:
        """The store the chat records its history in (the very instance the middleware writes)."""
        if self.writer is not None:
            return self.writer.history.session(self.id)
        return self.middleware.store_for(self.messages_path)

    @property
    def where(self) -> str:
        """Where the history is: the file, or the database (password redacted) and the session."""
        return str(self.messages_path) if self.writer is None else f"{self.writer.url} (session {self.id})"

    async def load(self) -> list[ModelMessage]:
        """The session's working context, read through the chat's own store."""
        if self.writer is None:
            return await self.manager.resume(self.id)
        return await self.history_store.load()

    async def recorded(self) -> bool:
        """Whether the session has a record yet."""
        storage = self.manager.storage
        if storage is None:
            return self.messages_path.exists()
        # The manager's handle, not the writer's: reading through the writer would move what it expects to find.
        return any(s.session_id == self.id for s in await storage.history.sessions())

    @property
    def id(self) -> str:
        assert self.session_id is not None
        return self.session_id

    async def describe(self) -> SessionInfo:
        """The session as `pydantic-deep sessions` lists it (read without blocking: on a database store too)."""
        return await self.manager.get_async(self.id)

    async def close(self) -> bool:
        """Leave the chat: a new session that never got a message is removed. Returns whether it was kept."""
        if self.new and not self.history and not await self.recorded():
            await self.manager.delete_async(self.id)
            return False
        return True

    async def switch(self, session_id: str) -> None:
        """Continue in another session (after `/fork` or `/rewind`): its history, its files, a new agent."""
        self.session_id, self.new, self.measured = session_id, False, False
        self._build()
        self.history = await self.load()

    async def session_cost(self) -> CostTotals:
        """What the session's history records as spent (every record: compacted requests too)."""
        return (await self.describe()).cost

    def last_message_id(self) -> str | None:
        return get_message_id(self.history[-1]) if self.history else None

    # -- the agent -------------------------------------------------------------------------------------------------

    def _build(self) -> None:
        from .. import create_deep_agent

        self.deps = self.manager.deps(self.id, workspace=self.workdir)
        window = self.resolved.max_tokens
        self.metrics = ContextMetrics()
        source: dict[str, Any] = (
            {"messages_path": self.messages_path}
            if self.writer is None
            else {"history_store": self.writer.history.session(self.id)}
        )
        self.middleware = ContextManagerMiddleware(
            **source,
            summarization_model=self.resolved.summarization_model,
            max_tokens=window,
            model_name=None if window else self.resolved.name,
            keep=("messages", KEEP_MESSAGES),
            event_callback=self._context_event,
        )
        self.ui.threshold = self.middleware.compress_threshold
        self.cost = CostTrackingMiddleware(session_max_cost_usd=self.max_cost, context_manager=self.middleware)
        self.checkpoints = self._checkpoints()
        limit = min(_EVICTION_LIMIT, window // 4) if window else _EVICTION_LIMIT
        self.agent = create_deep_agent(
            self.resolved.model,
            context_manager=self.middleware,
            cost_tracking=self.cost,
            eviction=EvictionProcessor(token_limit=limit, event_callback=self.ui.context_event),
            memory=True,
            history_search=True,
            capabilities=[self.metrics, self.checkpoints],
            store=self.manager.storage,  # memory and search: the database's (None: the session layout)
        )

    def _checkpoints(self) -> CheckpointMiddleware:
        storage = self.manager.storage
        if storage is not None:
            return CheckpointMiddleware(store=storage.checkpoints(self.id), history=storage.history, every="turn")
        session_dir = self.deps.session_dir
        assert session_dir is not None
        return CheckpointMiddleware(store=FileCheckpointStore(session_dir), every="turn")

    def _context_event(self, event: ContextEvent) -> None:
        self.metrics.record(event)
        self.ui.context_event(event)
