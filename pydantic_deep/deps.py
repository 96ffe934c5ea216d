"""`DeepAgentDeps`: what a deep agent's run carries — its backend, session paths, todos and context handle."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .backends import BackendProtocol, CompositeBackend, LocalBackend, StateBackend
from .todos import Todo

if TYPE_CHECKING:
    from summarization_pydantic_ai import ContextManagerMiddleware

__all__ = ["DEFAULT_BASE_DIR", "DeepAgentDeps", "new_session_id"]

DEFAULT_BASE_DIR = Path(".pydantic-deep")


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass
class DeepAgentDeps:
    """The deps of an agent built by `create_deep_agent`. Every field has a default:
    `await agent.run(prompt, deps=DeepAgentDeps())` works.

    Session layout (created on demand) under `base_dir`:
    `sessions/<session_id>/messages.json`, `sessions/<session_id>/plans/`, `<agent_name>/MEMORY.md`.

    Example:
        ```python
        deps = DeepAgentDeps(backend=LocalBackend('./workspace'), session_id='demo')
        ```
    """

    backend: BackendProtocol = field(default_factory=StateBackend)
    """Where the file tools and eviction read and write (default: an in-memory file system)."""
    session_id: str = field(default_factory=new_session_id)
    base_dir: Path | None = DEFAULT_BASE_DIR
    """Root of the session layout; `None` keeps nothing on disk (no messages.json)."""
    agent_name: str = "main"
    todos: list[Todo] = field(default_factory=list[Todo])
    context_manager: ContextManagerMiddleware | None = None
    """Set by the agent at the start of each run: the middleware to call for `/compact` and `/context`."""

    def __post_init__(self) -> None:
        if not self.session_id or "/" in self.session_id or self.session_id in {".", ".."}:
            raise ValueError(f"session_id must be a plain name, got {self.session_id!r}")
        if self.base_dir is not None:
            self.base_dir = Path(self.base_dir)

    @classmethod
    def on_disk(
        cls, workspace: str | Path = ".", *, base_dir: str | Path = DEFAULT_BASE_DIR, session_id: str | None = None
    ) -> DeepAgentDeps:
        """Deps that work on a real directory: the file tools see `workspace`, evicted outputs land in
        `<base_dir>/large_tool_results/` (the session layout), and the session's messages.json in `<base_dir>`.

        Example:
            ```python
            deps = DeepAgentDeps.on_disk('.', session_id='fix-bug-42')
            ```
        """
        base = Path(base_dir)
        backend = CompositeBackend(LocalBackend(workspace), routes={"/large_tool_results/": LocalBackend(base)})
        return cls(backend=backend, base_dir=base, session_id=session_id or new_session_id())

    @property
    def session_dir(self) -> Path | None:
        return self.base_dir / "sessions" / self.session_id if self.base_dir is not None else None

    @property
    def messages_path(self) -> Path | None:
        """`<base_dir>/sessions/<session_id>/messages.json`, or `None` without a `base_dir`."""
        return self.session_dir / "messages.json" if self.session_dir is not None else None

    @property
    def plans_dir(self) -> Path | None:
        return self.session_dir / "plans" if self.session_dir is not None else None

    @property
    def memory_dir(self) -> Path | None:
        """`<base_dir>/<agent_name>/`, where MEMORY.md lives."""
        return self.base_dir / self.agent_name if self.base_dir is not None else None
