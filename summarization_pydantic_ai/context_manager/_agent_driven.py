"""`AgentDrivenCompression`: near the limit the agent writes its own memory, then the history is cut down to it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelRequest, UserPromptPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.toolsets import FunctionToolset

from .._counters import UsageAnchoredCounter
from .._events import (
    AgentCompressionRequested,
    EventCallback,
)
from .._tokens import TokenCounter
from ..processors._base import RunInfo, check_counter, measure, request_info, resolve_budget
from ..store import HistoryStore
from ._agent_cut import NAME, MemoryCutMixin
from ._agent_request import DEFAULT_COMPRESSION_REQUEST, TOOL_NAME, check_request_template, compression_request
from ._agent_state import Attempt, CompressionRunState, Unfinished
from ._capability import ContextManagerMiddleware
from ._memory_file import (
    MemoryReader,
    Snapshot,
    check_relative_path,
    problem_with,
    read_local,
    read_with,
)

__all__ = ["DEFAULT_COMPRESSION_REQUEST", "AgentDrivenCompression", "MemoryReader"]

_RUN_ENDED = f"the run ended before {TOOL_NAME} was called"


@dataclass
class AgentDrivenCompression(MemoryCutMixin, AbstractCapability[Any]):
    """Let the agent compress its own context: at `trigger` of the budget it is asked to write a memory file and
    to call `compression_complete`; then the history is cut to `target_ratio` of the budget and the file's content
    takes the place of what was cut (the latest user request is kept verbatim).

    The file must have been written since the request (checked under `root`, or through `reader`). An attempt
    that writes nothing, or that the agent ignores for `attempt_steps` model requests, fails; after
    `max_attempts` failures the history is compacted algorithmically instead (by `middleware` when given).

    Example:
        ```python
        compression = AgentDrivenCompression(max_tokens=200_000, root='workspace')
        agent = Agent('openai:gpt-4.1', capabilities=[compression], tools=[write_file])
        ```
    """

    max_tokens: int | None = None
    """The context window; default: the middleware's, else from `model_name` or the run's model, else 200,000."""
    model_name: str | None = None
    trigger: float = 0.75
    """Ask for the memory when a request reaches this fraction of the budget."""
    target_ratio: float = 0.20
    """After the memory is written, cut the history down to about this fraction of the budget."""
    max_attempts: int = 2
    attempt_steps: int = 3
    """Model requests one attempt may take (write, write, `compression_complete`) before it counts as ignored."""
    root: str | os.PathLike[str] = "."
    """The directory the memory paths are relative to (local filesystem, when no `reader` is given)."""
    short_term_path: str = "memory/short_term/recent.md"
    long_term_path: str | None = "memory/long_term/notes.md"
    """Where the agent may keep notes that outlive the task (suggested to it, not checked); `None`: not mentioned."""
    reader: MemoryReader | None = None
    """Read the memory file another way, e.g. `lambda ctx, path: ctx.deps.backend.read(path)` (pydantic_deep)."""
    token_counter: TokenCounter = field(default_factory=UsageAnchoredCounter)
    middleware: ContextManagerMiddleware | None = None
    """Records the messages before they are cut, and does the fallback compaction."""
    history_store: HistoryStore | None = None
    """Without a middleware: a store that records the messages before they are cut."""
    summarization_model: Any = None
    """Summarizer of the fallback when there is no `middleware` (`None`: the deterministic one)."""
    request_template: str = DEFAULT_COMPRESSION_REQUEST
    event_callback: EventCallback | None = None
    """Receives the `AgentCompression*` events; unset, the middleware's `event_callback` does."""
    reserve_output_tokens: int = 0
    _unfinished: Unfinished = field(default_factory=Unfinished, repr=False, compare=False)
    """Shared by the per-run copies: compressions a run ended in the middle of, for the conversation's next run."""
    _run: CompressionRunState | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 < self.trigger < 1:
            raise ValueError(f"trigger must be a fraction in (0, 1), got {self.trigger!r}")
        if not 0 < self.target_ratio < self.trigger:
            raise ValueError(
                f"target_ratio must be in (0, trigger={self.trigger!r}) or every compression would fire again, "
                f"got {self.target_ratio!r}"
            )
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts!r}")
        if self.attempt_steps < 1:
            raise ValueError(f"attempt_steps must be >= 1, got {self.attempt_steps!r}")
        if self.reserve_output_tokens < 0:
            raise ValueError(f"reserve_output_tokens must be >= 0, got {self.reserve_output_tokens}")
        if self.middleware is not None and self.middleware.compress_threshold <= self.trigger:
            raise ValueError(
                f"the middleware compresses at {self.middleware.compress_threshold!r} of the budget, not after "
                f"trigger={self.trigger!r}: the agent would never be asked; lower trigger or raise compress_threshold"
            )
        if self.middleware is not None and self.history_store is not None:
            raise ValueError("pass either middleware (which has its own store) or history_store, not both")
        if self.reader is not None and not callable(self.reader):
            raise TypeError(f"reader must be a callable (ctx, path) -> text, got {self.reader!r}")
        check_counter(self.token_counter)
        self.short_term_path = check_relative_path(self.short_term_path, "short_term_path")
        if self.long_term_path is not None:
            self.long_term_path = check_relative_path(self.long_term_path, "long_term_path")
        check_request_template(self.request_template, path=self.short_term_path, long_term_path=self.long_term_path)

    # -- capability hooks ----------------------------------------------------------------------------------------

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        clone = replace(self)
        clone._run = CompressionRunState()
        return clone

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        state = self._run
        if state is None:
            return request_context  # only a run has the file tools and the tool this needs
        messages = request_context.messages
        run = RunInfo(ctx, request_info(request_context))
        state.budget = self._budget(run)
        threshold = int(self.trigger * state.budget)
        size = await measure(messages, self.token_counter, run, state.budget, threshold)
        state.tokens = size.tokens
        if not state.restored:
            state.restored = True
            self._restore(state, ctx)
        attempt = state.attempt
        if attempt is not None and attempt.requests >= self.attempt_steps:
            reason = f"{TOOL_NAME} was not called within {self.attempt_steps} model requests"
            await self._attempt_failed(state, ctx, reason)
        if state.memory is not None:
            result = await self._compact_to_memory(messages, size, state, ctx, run)
        elif state.fallback is not None:
            result = await self._fall_back(messages, size, state, ctx)
        else:
            await self._maybe_request(state, ctx, over=size.tokens >= threshold)
            return request_context
        if result is not messages:
            ctx.messages[:] = result
            request_context.messages = list(result)
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        # Shown on the wire only, never written into the run's history: the history keeps the user's own latest
        # request as its latest request, and a recorder sees no prompt the user did not write.
        state = self._run
        messages = request_context.messages
        if state is None or state.attempt is None or not messages or not isinstance(messages[-1], ModelRequest):
            return request_context
        last = messages[-1]
        asked = replace(last, parts=[*last.parts, UserPromptPart(self._request_text(state))])
        request_context.messages = [*messages[:-1], asked]
        return request_context

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        # A run can end in the middle of a compression (the agent answered instead): its attempts still count.
        state = self._run
        carried = state.unfinished() if state is not None else None
        if carried is not None and ctx.conversation_id:
            self._unfinished.put(ctx.conversation_id, carried)
        return result

    def get_toolset(self) -> Any:
        toolset: FunctionToolset[Any] = FunctionToolset()
        toolset.add_function(self._compression_complete, name=TOOL_NAME, takes_ctx=True, sequential=True)
        return toolset

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    # -- the attempt ---------------------------------------------------------------------------------------------

    async def _compression_complete(self, ctx: RunContext[Any]) -> str:
        """Call this after writing your memory file, when asked to compress your context."""
        state = self._run
        attempt = state.attempt if state is not None else None
        if state is None or attempt is None:
            return "No context compression was requested; carry on with the task."
        snapshot = await self._snapshot(ctx)
        problem = problem_with(snapshot, attempt.baseline, self.short_term_path, self._limit(state))
        if problem is None:
            state.memory, state.attempt = snapshot.text, None
            return "Memory saved. The conversation will be replaced by it before your next step; continue the task."
        await self._attempt_failed(state, ctx, problem)
        if state.fallback is not None:
            return f"{problem}. No attempts left: the conversation will be summarized automatically; carry on."
        return f"{problem}. Write the file with your file tools, then call {TOOL_NAME} again."

    def _budget(self, run: RunInfo) -> int:
        """The window minus the output reserve; unset, the middleware's settings, so both share one budget."""
        max_tokens, model_name, reserve = self.max_tokens, self.model_name, self.reserve_output_tokens
        if self.middleware is not None and max_tokens is None and model_name is None:
            max_tokens, model_name = self.middleware.max_tokens, self.middleware.model_name
            reserve = reserve or self.middleware.reserve_output_tokens
        return resolve_budget(max_tokens, model_name, reserve, run, True) or 1

    async def _maybe_request(self, state: CompressionRunState, ctx: RunContext[Any], *, over: bool) -> None:
        if state.attempt is not None:
            state.attempt.requests += 1
            return
        if not over:
            state.armed = True
            return
        if state.armed:
            state.armed = False  # once per crossing: re-armed when a measure falls below the trigger
            previous = _RUN_ENDED if state.failed_before else None
            await self._start_attempt(state, ctx, state.failed_before + 1, previous)
            state.failed_before = 0
            assert state.attempt is not None
            state.attempt.requests = 1

    def _restore(self, state: CompressionRunState, ctx: RunContext[Any]) -> None:
        """Take over what the conversation's previous run left unfinished."""
        carried = self._unfinished.take(ctx.conversation_id) if ctx.conversation_id else None
        if carried is None:
            return
        state.attempts_used = carried.attempts
        if carried.memory is not None:
            state.memory = carried.memory
        elif carried.fallback is not None:
            state.fallback = carried.fallback
        elif carried.attempts >= self.max_attempts:
            state.fallback = f"{carried.attempts} attempt(s) failed; the last: {_RUN_ENDED}"
        else:
            state.failed_before = carried.attempts

    async def _start_attempt(
        self, state: CompressionRunState, ctx: RunContext[Any], number: int, previous_failure: str | None
    ) -> None:
        state.attempt = Attempt(number, await self._snapshot(ctx))
        state.attempts_used = number
        event = AgentCompressionRequested(
            NAME, number, state.tokens, state.budget, self.short_term_path, previous_failure
        )
        await self._emit(event)

    async def _attempt_failed(self, state: CompressionRunState, ctx: RunContext[Any], reason: str) -> None:
        attempt = state.attempt
        assert attempt is not None
        if attempt.number >= self.max_attempts:
            state.attempt = None
            state.fallback = f"{attempt.number} attempt(s) failed; the last: {reason}"
        else:
            await self._start_attempt(state, ctx, attempt.number + 1, reason)

    async def _snapshot(self, ctx: RunContext[Any]) -> Snapshot:
        if self.reader is not None:
            return await read_with(self.reader, ctx, self.short_term_path)
        return read_local(self.root, self.short_term_path)

    def _request_text(self, state: CompressionRunState) -> str:
        pct = state.tokens / state.budget if state.budget else 0.0
        return compression_request(
            self.request_template,
            path=self.short_term_path,
            long_term_path=self.long_term_path,
            limit=self._limit(state),
            pct=pct,
        )
