"""The dual protocol every processor shares: a plain async callable and a pydantic-ai capability.

- Plain: `await processor(messages)`, or `Agent(capabilities=[ProcessHistory(processor)])`.
- Capability: `Agent(capabilities=[processor])`. Its `before_model_request` hook measures the request with its
  instructions and tool definitions, and writes the result into the run's history (`ctx.messages`), so a
  compaction happens once and later requests build on it. Per-run state is re-initialized by `for_run`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestContext

from .._sizes import ContextSize, Measure, check_keep_below_trigger, normalize_keep, normalize_trigger
from .._tokens import RequestAwareCounter, RequestInfo, TokenCounter, async_count_tokens, estimate_text_tokens
from .._windows import DEFAULT_MAX_TOKENS, is_offline_model, resolve_max_tokens

__all__ = ["HistoryProcessor", "RunInfo", "request_info", "request_overhead_tokens"]

logger = logging.getLogger("summarization_pydantic_ai")

TOOL_DEFINITION_OVERHEAD_TOKENS = 10


def request_overhead_tokens(request_context: ModelRequestContext) -> int:
    """Estimate the instructions and tool definitions a request sends besides its messages."""
    params = request_context.model_request_parameters
    total = 0
    for part in params.instruction_parts or ():
        total += estimate_text_tokens(str(getattr(part, "content", "") or ""))
    for tool in [*params.function_tools, *params.output_tools]:
        schema = json.dumps(tool.parameters_json_schema, separators=(",", ":"), default=str)
        total += TOOL_DEFINITION_OVERHEAD_TOKENS + estimate_text_tokens(tool.name + (tool.description or "") + schema)
    return total


def request_info(request_context: ModelRequestContext) -> RequestInfo:
    """What a counter may know about the request being prepared (`RequestInfo`), from the hook's context."""
    return RequestInfo(
        model=request_context.model,
        model_settings=request_context.model_settings,
        model_request_parameters=request_context.model_request_parameters,
        overhead_tokens=request_overhead_tokens(request_context),
    )


@dataclass
class RunInfo:
    """What the capability form knows during a run."""

    ctx: RunContext[Any]
    request: RequestInfo


@dataclass
class HistoryProcessor(AbstractCapability[Any]):
    """Base of the processors: subclasses implement `process(messages, run)`, never mutate the input list, and
    return the input list itself when they change nothing (a new list when they do).

    No call copies the history: below the trigger a call costs O(messages added since the previous call), not
    O(len(messages)) (see the benchmarks page)."""

    async def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        # No defensive copy (O(n) per call): `process` never mutates its input. pydantic-ai hands every history
        # processor a fresh copy of the history and copies the result again.
        return await self.process(messages if type(messages) is list else list(messages), None)

    async def process(self, messages: list[ModelMessage], run: RunInfo | None) -> list[ModelMessage]:
        raise NotImplementedError

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        return replace(self)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        info = request_info(request_context)
        messages = request_context.messages  # not copied: `process` never mutates its input
        result = await self.process(messages, RunInfo(ctx, info))
        if result is not messages:
            ctx.messages[:] = result
            request_context.messages = list(result)
        return request_context

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # takes callables and models: not spec-serializable


@dataclass
class _Budget:
    max_tokens: int | None
    reserve_output_tokens: int

    @property
    def budget(self) -> int | None:
        return None if self.max_tokens is None else max(self.max_tokens - self.reserve_output_tokens, 1)


_warned_defaults: set[str] = set()


def resolve_budget(
    max_tokens: int | None,
    model_name: str | None,
    reserve_output_tokens: int,
    run: RunInfo | None,
    needed: bool,
    *,
    assume_default: bool = True,
) -> int | None:
    """The token budget a fraction refers to: explicit `max_tokens`, else `model_name`'s or the run model's window
    (genai-prices), else 200,000 with a warning. Without `needed` (no fraction setting) only `max_tokens` counts."""
    window = max_tokens
    if window is None and not needed:
        return None  # nothing measures against the window: don't look it up (or warn about it)
    if window is None and model_name is not None:
        window = resolve_max_tokens(model_name)
    if window is None and run is not None and run.request.model is not None:
        model = run.request.model
        window = getattr(model, "context_window", None) or resolve_max_tokens(model)
    if window is None and assume_default:
        key = model_name or type(run.request.model).__name__ if run else "plain call"
        offline = run is not None and model_name is None and is_offline_model(run.request.model)
        if key not in _warned_defaults and not offline:  # TestModel and FunctionModel have no window to report
            _warned_defaults.add(key)
            logger.warning("context window unknown for %s; assuming %d tokens", key, DEFAULT_MAX_TOKENS)
        window = DEFAULT_MAX_TOKENS
    return _Budget(window, reserve_output_tokens).budget


async def measure(
    messages: Sequence[ModelMessage],
    counter: TokenCounter,
    run: RunInfo | None,
    budget: int | None,
    threshold: int | None,
    *,
    counted: int | None = None,
) -> Measure:
    """Count messages (and, in capability form, the request's instructions and tools). `counted`: what `counter`
    would return for `messages`, already known to the caller (then it is not asked again)."""
    if run is not None and isinstance(counter, RequestAwareCounter):
        tokens = await counter.count_request(messages, request=run.request, threshold=threshold)
    else:
        tokens = counted if counted is not None else await async_count_tokens(counter, messages)
        if run is not None:
            tokens += run.request.overhead_tokens
    return Measure(messages=len(messages), tokens=tokens, budget=budget)


def check_counter(counter: Any) -> None:
    if not callable(counter):
        raise TypeError(f"token_counter must be a callable messages -> int (sync or async), got {counter!r}")


def validate_cut_settings(
    trigger: Any,
    keep: Any,
    *,
    token_counter: Any,
    reserve_output_tokens: int = 0,
    max_tokens: int | None = None,
) -> tuple[tuple[ContextSize, ...], ContextSize]:
    """Check what the cutting processors share at construction; returns (triggers, keep) normalized."""
    triggers = normalize_trigger(trigger)
    normalized_keep = normalize_keep(keep)
    check_keep_below_trigger(normalized_keep, triggers)
    check_counter(token_counter)
    if reserve_output_tokens < 0:
        raise ValueError(f"reserve_output_tokens must be >= 0, got {reserve_output_tokens}")
    if max_tokens is not None and max_tokens <= reserve_output_tokens:
        raise ValueError("max_tokens must be larger than reserve_output_tokens")
    return triggers, normalized_keep
