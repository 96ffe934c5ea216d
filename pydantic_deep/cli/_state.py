"""The chat's state: the session, its deps, the agent built on them, and the working history in memory.

A new chat creates its session at once (after every check passed) and removes it again when it is left without a
message. Switching session (`/fork`, `/rewind`) rebuilds the agent over the other session's files; the model stays.
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
    JsonHistoryStore,
    get_message_id,
    validate_session_id,
)

from ..checkpoints import CheckpointMiddleware, FileCheckpointStore
from ..deps import DeepAgentDeps
from ..eviction import EvictionProcessor
from ..sessions import SessionInfo, SessionManager, SessionNotFoundError
from ._errors import CliError
from ._models import ResolvedModel
from ._ui import Ui

__all__ = ["KEEP_MESSAGES", "ChatState", "existing_session"]

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
    async def resume(
        cls,
        manager: SessionManager,
        resolved: ResolvedModel,
        workdir: Path,
        ui: Ui,
        session_id: str,
        *,
        max_cost: Decimal | None = None,
    ) -> ChatState:
        """The chat of an existing session: its working context loaded from its history file."""
        state = cls(manager, resolved, workdir, ui, session_id=session_id, max_cost=max_cost)
        state.history = await manager.resume(session_id)
        return state

    # -- the session -----------------------------------------------------------------------------------------------

    @property
    def messages_path(self) -> Path:
        path = self.deps.messages_path
        assert path is not None  # the CLI's deps always keep their session on disk
        return path

    @property
    def id(self) -> str:
        assert self.session_id is not None
        return self.session_id

    def info(self) -> SessionInfo:
        return self.manager.get(self.id)

    def close(self) -> bool:
        """Leave the chat: a new session that never got a message is removed. Returns whether it was kept."""
        if self.new and not self.history and not self.messages_path.exists():
            self.manager.delete(self.id)
            return False
        return True

    async def switch(self, session_id: str) -> None:
        """Continue in another session (after `/fork` or `/rewind`): its history, its files, a new agent."""
        history = await self.manager.resume(session_id)
        self.session_id, self.history, self.new, self.measured = session_id, history, False, False
        self._build()

    def session_cost(self) -> CostTotals:
        """What the session's history file records as spent (every record: compacted requests too)."""
        return self.info().cost

    def last_message_id(self) -> str | None:
        return get_message_id(self.history[-1]) if self.history else None

    # -- the agent -------------------------------------------------------------------------------------------------

    def _build(self) -> None:
        from .. import create_deep_agent

        self.deps = self.manager.deps(self.id, workspace=self.workdir)
        window = self.resolved.max_tokens
        self.metrics = ContextMetrics()
        self.middleware = ContextManagerMiddleware(
            messages_path=self.messages_path,
            summarization_model=self.resolved.summarization_model,
            max_tokens=window,
            model_name=None if window else self.resolved.name,
            keep=("messages", KEEP_MESSAGES),
            event_callback=self._context_event,
        )
        self.ui.threshold = self.middleware.compress_threshold
        self.cost = CostTrackingMiddleware(session_max_cost_usd=self.max_cost, context_manager=self.middleware)
        session_dir = self.deps.session_dir
        assert session_dir is not None
        self.checkpoints = CheckpointMiddleware(store=FileCheckpointStore(session_dir), every="turn")
        limit = min(_EVICTION_LIMIT, window // 4) if window else _EVICTION_LIMIT
        self.agent = create_deep_agent(
            self.resolved.model,
            context_manager=self.middleware,
            cost_tracking=self.cost,
            eviction=EvictionProcessor(token_limit=limit, event_callback=self.ui.context_event),
            memory=True,
            history_search=True,
            capabilities=[self.metrics, self.checkpoints],
        )

    def _context_event(self, event: ContextEvent) -> None:
        self.metrics.record(event)
        self.ui.context_event(event)
