"""`DeepAgentDeps`: what a deep agent's run carries — its backend, session paths, todos and context handle."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from summarization_pydantic_ai import InvalidSessionIdError, validate_session_id

from .backends import BackendProtocol, CompositeBackend, LocalBackend, StateBackend
from .todos import Todo

if TYPE_CHECKING:
    from summarization_pydantic_ai import ContextManagerMiddleware

__all__ = ["DEFAULT_BASE_DIR", "DeepAgentDeps", "new_session_id"]

DEFAULT_BASE_DIR = Path(".pydantic-deep")


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


EVICTED_OUTPUTS_ROUTE = "/large_tool_results/"


def default_backend(session_dir: Path | None) -> BackendProtocol:
    """An in-memory workspace whose evicted outputs live on disk in the session's directory, next to its
    messages.json (so they last as long as it does, and no other session's retention can delete them), or all
    in memory without one."""
    if session_dir is None:
        return StateBackend()
    return CompositeBackend(StateBackend(), routes={EVICTED_OUTPUTS_ROUTE: local_on_first_use(session_dir)})


class _LocalOnFirstUse:
    """A `LocalBackend` whose root directory is created when it is first used, not when deps are built (building
    `DeepAgentDeps()` must not create directories)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._backend: LocalBackend | None = None

    def __getattr__(self, name: str) -> Any:
        if self._backend is None:
            self._backend = LocalBackend(self._root)
        return getattr(self._backend, name)


def local_on_first_use(root: Path) -> BackendProtocol:
    """A `LocalBackend` of `root`, made (and `root` created) when first used."""
    return cast("BackendProtocol", _LocalOnFirstUse(root))


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

    backend: BackendProtocol = field(default=cast("BackendProtocol", None))
    """Where the file tools and eviction read and write. Default: an in-memory file system for the workspace, with
    `/large_tool_results/` (evicted outputs) on disk in the session's directory
    (`<base_dir>/sessions/<session_id>/large_tool_results/`), so previews in a saved session still read back after
    a restart; with `base_dir=None`, everything in memory."""
    session_id: str = field(default_factory=new_session_id)
    base_dir: Path | None = DEFAULT_BASE_DIR
    """Root of the session layout; `None` keeps nothing on disk (no messages.json)."""
    agent_name: str = "main"
    todos: list[Todo] = field(default_factory=list[Todo])
    context_manager: ContextManagerMiddleware | None = None
    """Set by the agent at the start of each run: the middleware to call for `/compact` and `/context`."""

    def __post_init__(self) -> None:
        try:  # one path component: no separator, no `..`, no NUL, at most 255 bytes
            validate_session_id(self.session_id)
        except InvalidSessionIdError as exc:
            raise InvalidSessionIdError(f"DeepAgentDeps(session_id=...): {exc}") from None
        if self.base_dir is not None:
            self.base_dir = Path(self.base_dir)
        if cast("BackendProtocol | None", self.backend) is None:
            self.backend = default_backend(self.session_dir)

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
        backend = CompositeBackend(LocalBackend(workspace), routes={EVICTED_OUTPUTS_ROUTE: LocalBackend(base)})
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
