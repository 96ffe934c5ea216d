"""`EvictionProcessor`: large tool outputs go to the backend; the history keeps a structure-aware preview."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import RunContext, ToolReturn
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ToolCallPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset

from summarization_pydantic_ai._tokens import estimate_text_tokens
from summarization_pydantic_ai.compression import detect_kind, make_preview

from ..backends import BackendProtocol, normalize_path
from ._agent_mode import archive_toolset, marked
from ._content import as_text, pageable, printable, referenced_paths
from ._history_pass import HistoryPassMixin
from ._policy import (
    EVICTION_METADATA_KEY,
    EvictionFailed,
    EvictionPolicy,
    OutputArchived,
    OutputEvicted,
    RetentionPolicy,
)
from ._previews import metadata_of as _metadata
from ._run_state import RunState
from ._step import page_lines
from ._store import EvictionArchive

__all__ = ["EvictionProcessor"]

logger = logging.getLogger("pydantic_deep")

EventCallback = Callable[[OutputEvicted | OutputArchived | EvictionFailed], Any]


_DEFAULT_POLICY = EvictionPolicy()
"""What `policy_for` returns when no policy matches (frozen, so one instance serves every call)."""


@dataclass
class EvictionProcessor(HistoryPassMixin, AbstractCapability[Any]):
    """Evict tool outputs above `token_limit` to `{eviction_path}/{safe id}` on the run's backend.

    As a capability it acts when a tool returns (`after_tool_execute`), so everything downstream (the history
    store, checkpoints, token counts) sees the evicted form; as a history processor (`await processor(messages)`,
    and before every request in capability form) it evicts large outputs already in a loaded history and
    archives agent-mode outputs. The preview names the file and how to page it with
    `read_file(path, offset, limit)`. If saving fails, the original output stays (an `EvictionFailed` event).

    Example:
        ```python
        agent = Agent(model, deps_type=DeepAgentDeps, capabilities=[EvictionProcessor(token_limit=10_000)])
        ```
    """

    token_limit: int = 20_000
    eviction_path: str = "/large_tool_results/"
    backend: BackendProtocol | None = None
    """Used when the run's deps have no `backend` (and always in plain history-processor use)."""
    policies: Sequence[EvictionPolicy] = ()
    """Per-tool overrides; the first matching pattern wins."""
    retention: RetentionPolicy | None = field(default_factory=RetentionPolicy)
    preview_chars: int = 2_000
    event_callback: EventCallback | None = None
    step_token_limit: int | None = None
    """The most the outputs of one step (the tool returns answering one model response) may take together: above
    it the largest are evicted too, even under `token_limit`, until the rest fit (parallel calls whose outputs
    each pass `token_limit` can still fill the window together). `None`: outputs are judged one by one."""
    _run: RunState | None = field(default=None, init=False, repr=False)
    _archives: dict[int, EvictionArchive] = field(default_factory=dict[int, EvictionArchive], init=False, repr=False)
    _archive_requests: set[str] = field(default_factory=set[str], init=False, repr=False)
    """tool_call_ids the agent asked to archive (shared by the run copies: the tool is built once per agent)."""

    def __post_init__(self) -> None:
        if self.token_limit < 1:
            raise ValueError(f"token_limit must be positive, got {self.token_limit}")
        if self.step_token_limit is not None and self.step_token_limit < 1:
            raise ValueError(f"step_token_limit must be positive or None, got {self.step_token_limit}")
        if self.preview_chars < 200:
            raise ValueError(f"preview_chars must be at least 200, got {self.preview_chars}")
        normalize_path(self.eviction_path)  # a bad path fails here, not at the first eviction

    # -- settings ------------------------------------------------------------------------------------------------

    def policy_for(self, tool_name: str) -> EvictionPolicy:
        for policy in self.policies:
            if policy.matches(tool_name):
                return policy
        return _DEFAULT_POLICY

    def _limit(self, policy: EvictionPolicy) -> int:
        return policy.token_limit or self.token_limit

    def backend_for(self, ctx: RunContext[Any] | None) -> BackendProtocol | None:
        """Where the outputs of the run of `ctx` are saved: its deps' `backend`, else `backend`."""
        deps_backend = getattr(ctx.deps, "backend", None) if ctx is not None else None
        return deps_backend if deps_backend is not None else self.backend

    def archive(self, backend: BackendProtocol) -> EvictionArchive:
        """The eviction directory on `backend` (one object per backend, sharing its dedup index)."""
        archive = self._archives.get(id(backend))
        if archive is None or archive.backend is not backend:
            archive = self._archives[id(backend)] = EvictionArchive(backend, self.eviction_path)
        return archive

    async def cleanup(
        self, backend: BackendProtocol | None = None, *, keep_referenced_by: Sequence[ModelMessage] = ()
    ) -> list[str]:
        """Apply the retention policy now; returns exactly the files deleted. Files that a preview in
        `keep_referenced_by` (a live history) points to are never deleted."""
        target = backend or self.backend
        if target is None or self.retention is None:
            return []
        protected = set(referenced_paths(keep_referenced_by))
        return await self.archive(target).apply_retention(self.retention, protected=protected)

    # -- eviction ------------------------------------------------------------------------------------------------

    async def _emit(self, event: OutputEvicted | OutputArchived | EvictionFailed) -> None:
        if self.event_callback is None:
            return
        try:
            result = self.event_callback(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("eviction event callback failed")

    async def evict_text(
        self,
        backend: BackendProtocol,
        text: str,
        *,
        tool_name: str,
        tool_call_id: str,
        policy: EvictionPolicy,
        referenced: Sequence[ModelMessage] = (),
    ) -> tuple[str, dict[str, Any]] | None:
        """Save `text` and return (replacement text, metadata), or `None` when saving failed. Retention then runs,
        sparing the new file and every file a preview in `referenced` (the live history) points to."""
        kind = detect_kind(text) if policy.preview == "auto" else policy.preview
        text = pageable(text, kind)
        tokens = estimate_text_tokens(text)
        try:
            path, deduplicated = await self.archive(backend).save(
                text, policy=policy, tool_call_id=tool_call_id, tool_name=tool_name, kind=kind
            )
        except Exception as exc:
            logger.warning("could not evict the output of %s (%s); it stays in the history", tool_name, exc)
            await self._emit(EvictionFailed(tool_name, tool_call_id, f"{type(exc).__name__}: {exc}"))
            return None
        await self._emit(OutputEvicted(tool_name, tool_call_id, path, tokens, kind, deduplicated))
        if self.retention is not None and not deduplicated:
            protected = {path, *referenced_paths(referenced)}
            removed = await self.archive(backend).apply_retention(self.retention, protected=protected)
            if removed:
                logger.info("eviction retention removed %d old files", len(removed))
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)  # as read_file numbers them
        preview = make_preview(printable(text), kind, max_chars=self.preview_chars)
        page = page_lines(lines, tokens, self._limit(policy))  # a page read back is not evicted again
        note = (
            f"\n\n[The full output ({tokens:,} tokens, {lines:,} line{'' if lines == 1 else 's'}) was saved to {path}. "
            f'Read it with read_file(path="{path}", offset=0, limit={page}) and page on with a larger offset.]'
        )
        metadata = {"path": path, "tokens": tokens, "lines": lines, "kind": kind, "state": "archived"}
        return preview + note, metadata

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, result: Any
    ) -> Any:
        unchanged: Any = result
        value = result.return_value if isinstance(result, ToolReturn) else result
        text = as_text(value)
        policy = self.policy_for(call.tool_name)
        if text is None or estimate_text_tokens(text) <= self._limit(policy):
            return unchanged
        backend = self.backend_for(ctx)
        base_metadata = _metadata(result.metadata) if isinstance(result, ToolReturn) else {}  # pyright: ignore[reportUnknownMemberType]
        content = result.content if isinstance(result, ToolReturn) else None  # pyright: ignore[reportUnknownMemberType]
        if policy.mode == "agent":
            tokens, turns = estimate_text_tokens(text), policy.archive_after_turns
            shown = marked(text, tokens=tokens, tool_call_id=call.tool_call_id, archive_after_turns=turns)
            metadata = {**base_metadata, EVICTION_METADATA_KEY: {"mode": "agent", "state": "pending"}}
            return ToolReturn(return_value=shown, content=content, metadata=metadata)
        if backend is None:
            await self._emit(
                EvictionFailed(call.tool_name, call.tool_call_id, "no backend: set deps.backend or backend=")
            )
            return unchanged
        evicted = await self.evict_text(
            backend,
            text,
            tool_name=call.tool_name,
            tool_call_id=call.tool_call_id,
            policy=policy,
            referenced=ctx.messages,
        )
        if evicted is None:  # kept whole, and marked so later requests don't try again
            failed = {**base_metadata, EVICTION_METADATA_KEY: {"state": "failed"}}
            return ToolReturn(return_value=value, content=content, metadata=failed)
        replacement, info = evicted
        return ToolReturn(
            return_value=replacement, content=content, metadata={**base_metadata, EVICTION_METADATA_KEY: info}
        )

    # -- history processor form ------------------------------------------------------------------------------------

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        return await self._process(messages, RunState(), None)

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        clone = replace(self)
        clone._archives = self._archives
        clone._archive_requests = self._archive_requests
        clone._run = RunState()
        return clone

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = request_context.messages
        result = await self._process(messages, self._run or RunState(), ctx)
        if result is not messages:
            ctx.messages[:] = result
            request_context.messages = list(result)
        return request_context

    def get_toolset(self) -> FunctionToolset[Any] | None:
        if not any(p.mode == "agent" for p in self.policies):
            return None
        return archive_toolset(self._archive_requests)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None
