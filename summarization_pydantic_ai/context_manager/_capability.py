"""`ContextManagerMiddleware`: persist every message, count the context, compress it once per trigger crossing."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelContextWindowExceededError, RetryModelRequest
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ToolCallPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition

from .._background import check_background_below, normalize_background_start
from .._cache_policy import CachePolicy
from .._events import EventCallback, ToolOutputTruncated, emit_event
from .._pinning import WorkingSetSettings
from .._sizes import normalize_keep
from .._tokens import TokenCounter, count_tokens_approximately
from ..processors._base import RunInfo, check_counter, measure, request_info
from ..processors._summary_plan import make_summarizer
from ..store import HistoryPage, HistoryStore, HistoryStoreError, JsonHistoryStore, ensure_message_id
from ..summarize import RUN_MODEL, Summarizer
from ..summarize._validate import DEFAULT_REQUIRED_SECTIONS, check_sections
from ._clamp import check_clamp_settings
from ._compress import NAME
from ._conversation import check_same_conversation, restore_merged_requests
from ._counting import UsageCallback
from ._overflow import OverflowMixin
from ._pipeline import PipelineMixin
from ._stamp import stamp_response
from ._state import (
    ContextUsage,
    RunState,
    SharedState,
    record_new_messages,
    unseen_from,
)
from ._store_source import PathSource, StoreSourceMixin
from ._truncate import truncate_output

__all__ = ["ContextManagerMiddleware"]

BeforeCompressCallback = Callable[[list[ModelMessage], int], Awaitable[None] | None]
AfterCompressCallback = Callable[[list[ModelMessage]], Awaitable[str | None] | str | None]

_MIN_TOOL_OUTPUT_TOKENS = 64


@dataclass
class ContextManagerMiddleware(
    PipelineMixin, OverflowMixin, StoreSourceMixin, WorkingSetSettings, AbstractCapability[Any]
):
    """Keep every message in a history file while the working context stays under the model's window.

    Before each model request it records the new messages (with stable ids) in the history store, measures the
    request (messages, instructions, tools), reports usage, and when the measure reaches
    `compress_threshold` of the budget, summarizes the old part of the history once and writes the result into
    the run's history, followed by the working set (latest request, pinned messages, todo list, recent errors and
    tool exchanges) verbatim. Tool outputs above `max_tool_output_tokens` are cut to head and tail lines as they are
    produced. A request the provider rejects as too long is shrunk by a ladder of steps and retried (see
    `overflow_recovery`).

    Also usable as a plain history processor: `await middleware(messages)` or `ProcessHistory(middleware)`.

    Example:
        ```python
        middleware = ContextManagerMiddleware(messages_path='.sessions/demo/messages.json')
        agent = Agent('openai:gpt-4.1', capabilities=[middleware])
        ```
    """

    max_tokens: int | None = None
    """The context window; default: from `model_name` or the run's model (genai-prices), else 200,000 (reported)."""
    model_name: str | None = None
    compress_threshold: float = 0.9
    """Compress when the request reaches this fraction of the budget."""
    keep: Any = ("messages", 0)
    """What survives a compression besides the summary: 0 keeps only the in-flight exchange."""
    summarization_model: Any = RUN_MODEL
    """`RUN_MODEL` (the run's own model, with a cache-aligned summary request), a model name, a pydantic-ai
    `Model`, a `Summarizer`, or `None` for the deterministic summarizer. A name pydantic-ai cannot resolve is
    refused here; when no model can be called the deterministic summary is used, with one warning."""
    token_counter: TokenCounter = count_tokens_approximately
    messages_path: PathSource = None
    """Where messages.json lives: a path, or a function of the `RunContext` returning one (one file per session)."""
    max_tool_output_tokens: int | None = None
    max_part_tokens: Any = None
    """Clamp any single part above this (an `int` of tokens, `("tokens", n)` or `("fraction", f)` of the budget) to
    its head and tail as it enters the history, after it is recorded: the marker names the message, and the store
    keeps the original (see `ClampOversizedParts`). `None`: off."""
    clamp_to_tokens: int | None = None
    """About what a clamped part keeps; default: a tenth of `max_part_tokens`, at least 128 tokens."""
    on_usage_update: UsageCallback | None = None
    """Called as `(pct, current, max)` before each request; `pct` is a fraction (0.4 means 40%)."""
    on_before_compress: BeforeCompressCallback | None = None
    """Called as `(messages, cutoff_index)` before a compression."""
    on_after_compress: AfterCompressCallback | None = None
    """Called with the compressed history; a returned string is re-injected after the summary."""
    event_callback: EventCallback | None = None
    history_store: HistoryStore | Callable[[RunContext[Any]], HistoryStore | None] | None = None
    """A store to use instead of `messages_path` (any `HistoryStore`, e.g. `open_store('sqlite:///h.db', id)`),
    or a function of the `RunContext` returning one (one store per session, e.g. `database.session(...)`)."""
    reserve_output_tokens: int = 0
    summary_timeout: float | None = 120.0
    prompt_template: str | None = None
    fsync: bool = False
    """fsync every append (survives power loss, not just a killed process); slower."""
    lock_timeout: float = 0.0
    """Seconds to wait for another process's lock on messages.json (0: fail at once with `HistoryStoreLockedError`)."""
    shared_file: bool = False
    """Let a run that does not continue the file's conversation append to it anyway (see "One file, one
    conversation"); by default such a run is refused with a `HistoryStoreError` saying how to resume."""
    expose_history_tool: bool = False
    """Give the agent a `read_history(start_id, end_id)` tool, and point summaries at the originals."""
    overflow_recovery: bool = True
    """When the provider rejects a request as too long, shrink the history (clear old tool results, cut large
    tool returns, summarize, slide the window: as little as it takes) and retry it, each retry smaller."""
    max_overflow_retries: int = 2
    """Retries per request after an overflow; then the original error is raised with a note of what was tried."""
    required_sections: Sequence[str] = DEFAULT_REQUIRED_SECTIONS
    """Headings a summary must have; a summary without one (or without the latest user request, verbatim) is
    refused: the summarizer is asked once more, then the deterministic summary is used."""
    cache_policy: CachePolicy | None = None
    """Plan compactions by what they cost with the prompt cache counted: from `compress_threshold` on, compact
    where the summary pays for its cache re-write (see `CachePolicy`), at the latest at the policy's limit."""
    background_start: Any = None
    """Prepare the next compaction's summary during the run once a request reaches this (a fraction of the budget
    such as `0.7`, an `int` of tokens, `("fraction", f)` or `("tokens", n)`; below `compress_threshold`): when the
    threshold is reached, the prepared summary is used at once, with no model call on the request path (see
    "Background compaction"). `None`: off."""
    _shared: SharedState = field(default_factory=SharedState, repr=False, compare=False)
    _run: RunState | None = field(default=None, init=False, repr=False, compare=False)
    _plain: RunState = field(default_factory=RunState, init=False, repr=False, compare=False)
    """State of the plain (ProcessHistory) form, which has no per-run copy: one conversation per instance."""
    _summarizer: Summarizer = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_working_set()
        if not 0 < self.compress_threshold <= 1:
            raise ValueError(f"compress_threshold must be in (0, 1], got {self.compress_threshold!r}")
        self._keep = normalize_keep(self.keep)
        self._background_start = normalize_background_start(self.background_start)
        check_background_below(self._background_start, [("fraction", self.compress_threshold)])
        check_counter(self.token_counter)
        if self.max_tokens is not None and self.max_tokens <= self.reserve_output_tokens:
            raise ValueError("max_tokens must be larger than reserve_output_tokens")
        if self.reserve_output_tokens < 0:
            raise ValueError(f"reserve_output_tokens must be >= 0, got {self.reserve_output_tokens}")
        if self.max_tool_output_tokens is not None and self.max_tool_output_tokens < _MIN_TOOL_OUTPUT_TOKENS:
            raise ValueError(f"max_tool_output_tokens must be at least {_MIN_TOOL_OUTPUT_TOKENS}")
        self._part_limit = check_clamp_settings(self.max_part_tokens, self.clamp_to_tokens)
        if self.lock_timeout < 0:
            raise ValueError(f"lock_timeout must be >= 0, got {self.lock_timeout!r}")
        if self.history_store is not None and self.messages_path is not None:
            raise ValueError("pass either messages_path or history_store, not both")
        retries = self.max_overflow_retries
        if isinstance(retries, bool) or not isinstance(retries, int):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"max_overflow_retries must be an int, got {self.max_overflow_retries!r}")
        if self.max_overflow_retries < 0:
            raise ValueError(f"max_overflow_retries must be >= 0, got {self.max_overflow_retries}")
        self.required_sections = check_sections(self.required_sections)
        self._summarizer = make_summarizer(
            self.summarization_model, prompt_template=self.prompt_template, timeout=self.summary_timeout
        )

    # -- public API ----------------------------------------------------------------------------------------------

    @property
    def compression_count(self) -> int:
        """Compactions performed through this instance, all runs together."""
        return self._shared.compression_count

    @property
    def usage(self) -> ContextUsage | None:
        """The latest measurement (before the latest model request of any run), for `/context`."""
        return self._shared.last_usage

    @property
    def store(self) -> HistoryStore | None:
        """The history store in use (`None` without one, or when `messages_path` depends on the run)."""
        return self._static_store()

    def store_for(self, path: str | os.PathLike[str]) -> JsonHistoryStore:
        """The store of one session's file (the very instance this middleware writes)."""
        return JsonHistoryStore.open(path, fsync=self.fsync, lock_timeout=self.lock_timeout)

    def store_for_run(self, ctx: RunContext[Any]) -> HistoryStore | None:
        """The history store a run writes (its own file when `messages_path` is a function of the run)."""
        return self._store_for_run(ctx)

    def request_compact(self, focus: str | None = None) -> None:
        """Compress at the next model request of a run using this instance (e.g. for `/compact`)."""
        with self._shared.lock:
            self._shared.pending_compacts.append(focus)

    async def compact(self, messages: Sequence[ModelMessage], focus: str | None = None) -> list[ModelMessage]:
        """Compress now, also outside a run; records the messages and returns the new working history."""
        messages = list(messages)
        store = self._static_store()
        await record_new_messages(RunState(), messages, store)
        budget, _ = self._budget(None)
        size = await measure(messages, self.token_counter, None, budget, None)
        return await self._compress(messages, size, budget, focus, store, None)

    async def read_history(
        self, start_id: str | None = None, end_id: str | None = None, *, offset: int = 0, limit: int = 50
    ) -> HistoryPage:
        """The original messages from `start_id` to `end_id` (inclusive), verbatim and paged."""
        store = self._static_store()
        if store is None:
            raise HistoryStoreError("no history store: set messages_path (a path) or history_store")
        return await store.read(start_id, end_id, offset=offset, limit=limit)

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Plain history-processor form: record, measure and compress without a run context.

        Without a run to keep state in, the instance keeps it: use one instance per conversation in this form."""
        state = self._run or self._plain
        store = self._static_store()
        if store is not None:  # merged requests can only be among the messages the recording has not seen
            messages = await restore_merged_requests(messages, store, start=unseen_from(store, messages))
        return await self._process(messages, state, None, None, store)

    # -- capability hooks ----------------------------------------------------------------------------------------

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        clone = replace(self)
        clone._run = RunState()
        return clone

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        state = self._run or self._plain
        state.overflow = None  # a new request step: its own overflow retries
        info = request_info(request_context)
        messages = request_context.messages
        store = self._store_for_run(ctx)
        if not state.conversation_checked:  # the run's first request: its history is the given message_history
            state.conversation_checked = True
            messages = await restore_merged_requests(messages, store)
            if not self.shared_file and store is not None:
                check_same_conversation(messages, store)
        result = await self._process(messages, state, RunInfo(ctx, info), ctx, store)
        if result is not request_context.messages:
            ctx.messages[:] = result
            request_context.messages = list(result)
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        state = self._run
        if state is not None and state.retry_messages is not None:
            request_context.messages = list(state.retry_messages)
            state.retry_messages = None
        return request_context

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        # The id now; the record once the agent has committed (stamped) the response: at the next request or at
        # the end of the run, so the file holds it exactly as the history does.
        ensure_message_id(response)
        state = self._run
        if state is not None and state.measure is not None:
            stamp_response(response, state.measure, state.overflow.retries if state.overflow else ())
        await self._overflow_succeeded(state)
        return response

    async def on_model_request_error(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, error: Exception
    ) -> ModelResponse:
        state = self._run
        if not (self.overflow_recovery and isinstance(error, ModelContextWindowExceededError) and state is not None):
            raise error
        budget, _ = self._budget(request_context.model)
        result = await self._recover_overflow(ctx, request_context, error, state, budget, self._store_for_run(ctx))
        ctx.messages[:] = result
        state.retry_messages = list(result)
        raise RetryModelRequest()

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any, result: Any
    ) -> Any:
        if self.max_tool_output_tokens is None:
            return result
        truncated, cut = truncate_output(result, self.max_tool_output_tokens)
        if cut is not None:
            event = ToolOutputTruncated(
                NAME,
                call.tool_name,
                call.tool_call_id,
                cut.tokens_before,
                cut.tokens_after,
                cut.lines_before,
                cut.lines_kept,
            )
            await emit_event(self.event_callback, event)
        return truncated

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        state = self._run or self._plain
        await record_new_messages(state, result.all_messages(), self._store_for_run(ctx))
        return result

    def get_toolset(self) -> Any:
        if not self.expose_history_tool:
            return None
        from ._toolset import history_toolset

        return history_toolset(self._store_for_run)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None
