"""`CostTrackingMiddleware`: price every model request, keep run and session totals, stop a run at its budget."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from opentelemetry import trace
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.usage import RequestUsage

from .._events import BudgetExceeded, BudgetWarningIssued, CallbackFailed, CostRecorded, EventCallback, emit_event
from .._messages import get_message_id
from .._tokens import count_tokens_approximately
from ..cache import PromptCache
from ..store import HistoryStore, ensure_message_id
from ._budget import BudgetExceededError, Limit, NextRequest, amount_text, estimate_next, limits_of
from ._cache_tracking import is_reported
from ._ledger import Priced
from ._pricing import model_label
from ._records import REQUEST_KIND_KEY
from ._spend import CostTotals
from ._state import RunCost, SharedCost, summaries_in

__all__ = ["CostTrackingMiddleware"]

logger = logging.getLogger("summarization_pydantic_ai")

NAME = "CostTrackingMiddleware"
CostCallback = Callable[[CostRecorded], Awaitable[None] | None]
StoreSource = HistoryStore | Callable[[RunContext[Any]], "HistoryStore | None"] | None


@dataclass
class CostTrackingMiddleware(AbstractCapability[Any]):
    """Price every model request with genai-prices, keep totals per run and per session, enforce budgets.

    After each model response it records the input, cache-read, cache-write and output tokens and the price for
    the response's model, by kind: the agent's own requests, the summarizer's calls (read from the summaries
    the context manager writes) and overflow retries. Session totals come from the session's history (the
    store, when there is one): a resumed session continues its totals, with no second log.

    Before each request it estimates what the request will add and refuses to send one that would pass a
    budget: the run stops with `BudgetExceededError`, its history intact. At `warn_fraction` of a budget it
    reports `BudgetWarningIssued` and, with `warn_model`, tells the model.

    Place it after `ContextManagerMiddleware` in `capabilities` (it then sees the compacted request and the
    summaries), or pass `context_manager=` so it reads the same store.

    Example:
        ```python
        cost = CostTrackingMiddleware(max_cost_usd=0.50, context_manager=middleware)
        agent = Agent('openai:gpt-4.1', capabilities=[middleware, cost])
        ```
    """

    max_cost_usd: Decimal | float | None = None
    """Per run, in US dollars."""
    max_tokens_total: int | None = None
    """Per run: input plus output tokens of every request (summarizer calls included)."""
    session_max_cost_usd: Decimal | float | None = None
    session_max_tokens_total: int | None = None
    warn_fraction: float = 0.8
    """Report `BudgetWarningIssued` when the spend reaches this fraction of a budget (once per budget and run)."""
    warn_model: bool = False
    """Also tell the model, with the request that crosses `warn_fraction`, so it can wrap up."""
    on_cost: CostCallback | None = None
    """Called with each `CostRecorded` (sync or async); an exception is logged and reported, never raised."""
    event_callback: EventCallback | None = None
    context_manager: Any = None
    """A `ContextManagerMiddleware`: its history store (per run, when its path depends on the run) holds the
    session whose totals this middleware continues."""
    history_store: StoreSource = None
    """The session's store, or a function of the `RunContext` returning it (instead of `context_manager`)."""
    price_as: str | None = None
    """Price every agent request as this model (`'openai:gpt-4.1'`) instead of the name the response carries."""
    simulate_cache: bool = True
    """Bill each request through a simulated prompt cache (`CacheSimulator`) too: its cache read / write /
    uncached tokens are the provider's where it reported them, else the simulator's estimate (marked as such),
    and each rewrite of the cached prefix is priced (see Prompt caching and cost)."""
    prompt_cache: PromptCache | None = None
    """The prompt cache to simulate; default: the priced model's family (`prompt_cache_for`), for Anthropic with
    the breakpoints its model settings ask for (automatic caching of the last message when they ask none)."""
    _shared: SharedCost = field(default_factory=SharedCost, repr=False, compare=False)
    _state: RunCost = field(default_factory=RunCost, init=False, repr=False, compare=False)
    _limits: tuple[Limit, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 < self.warn_fraction <= 1:
            raise ValueError(f"warn_fraction must be in (0, 1], got {self.warn_fraction!r}")
        if self.context_manager is not None and self.history_store is not None:
            raise ValueError("pass either context_manager or history_store, not both")
        if self.context_manager is not None and not hasattr(self.context_manager, "store_for_run"):
            raise TypeError(f"context_manager must be a ContextManagerMiddleware, got {self.context_manager!r}")
        self._limits = limits_of(self)

    # -- public API ----------------------------------------------------------------------------------------------

    @property
    def totals(self) -> CostTotals | None:
        """The session's totals as of the latest request of any run (`None` before the first)."""
        return self._shared.session_totals

    @property
    def run_totals(self) -> CostTotals | None:
        """The latest run's totals (`None` before the first request)."""
        return self._shared.run_totals

    # -- capability hooks ----------------------------------------------------------------------------------------

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        clone = replace(self)
        # The history the run is given, and its summaries (the session's): any other summary is made during the
        # run, even at its very first request, before this middleware's first hook sees the history.
        clone._state = RunCost(given_summaries=summaries_in(ctx.messages))
        clone._state.cursor.advance(ctx.messages)
        clone._limits = self._limits
        return clone

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        state = self._state
        if not state.started:
            await self._start(ctx, state)
        await self._count_summaries(ctx, state)
        state.counted = count_tokens_approximately(request_context.messages)
        next_request = self._estimate(state, request_context)
        await self._check_budgets(ctx, state, next_request)
        await self._warn(state, next_request, request_context)
        return request_context

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        state = self._state
        if state.retrying:
            await self._count_summaries(ctx, state)  # overflow recovery may have compacted since the request
        kind = "overflow_retry" if state.retrying else "agent"
        state.retrying = False
        if kind != "agent":
            response.metadata = {**(response.metadata or {}), REQUEST_KIND_KEY: kind}
        # Its id now (the context manager, whose hook runs after this one, keeps it): the ledgers know the
        # response by it, so the next run does not price its record again.
        state.produced.append(ensure_message_id(response))
        if self.simulate_cache:
            await self._bill_cache(ctx, request_context, response, state)
        priced = state.run.add_response(response, kind, price_as=self.price_as)
        state.session.add_response(response, kind, price_as=self.price_as)
        state.requests += 1
        state.last = (response.usage, state.counted)
        if priced is not None:
            await self._report(priced, state)
        return response

    async def on_model_request_error(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, error: Exception
    ) -> ModelResponse:
        if isinstance(error, ModelContextWindowExceededError):
            self._state.retrying = True  # the context manager may retry it, smaller
        raise error

    async def after_run(self, ctx: RunContext[Any], *, result: Any) -> Any:
        state = self._state
        if state.started:  # the next run of the session starts from this one's totals
            messages = result.all_messages()
            self._shared.seeds.finish(self._store(ctx), state.seed, state.session, messages, state.produced)
        totals = state.run.totals()
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(_span_attributes("cost.run", totals))
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    # -- internals -----------------------------------------------------------------------------------------------

    async def _start(self, ctx: RunContext[Any], state: RunCost) -> None:
        """Seed the session's totals from its store (every record), else from the history the run was given; only
        what this instance has not priced yet is priced (`SessionSeeds`)."""
        state.started = True
        store = self._store(ctx)
        seeds = self._shared.seeds
        if store is not None:
            state.session, state.seed = await seeds.from_store(store)
            state.session.skip(ctx.messages)  # what the run was given but the store does not hold
        else:
            state.session, state.seed = seeds.from_history(ctx.messages)  # every message of it counted or marked
        # The run's ledger only ever gets the run's responses and the summaries made during the run: those of
        # the history it was given are the session's (counted above). The summary search starts from that history
        # (`for_run`): one made at this first request is the run's (the session's ledger has it from the store).
        state.run.skip(state.given_summaries)
        state.last = _previous_request(ctx.messages)

    def _store(self, ctx: RunContext[Any]) -> HistoryStore | None:
        if self.context_manager is not None:
            return self.context_manager.store_for_run(ctx)
        if callable(self.history_store):
            return self.history_store(ctx)
        return self.history_store

    async def _count_summaries(self, ctx: RunContext[Any], state: RunCost) -> None:
        # Only what is new since the last look (a compaction replaces from its summary on): O(new messages).
        change = state.cursor.advance(ctx.messages)
        new = [*(ctx.messages[i] for i in change.edited), *ctx.messages[change.start :]]
        for summary in summaries_in(new):
            if (summary_id := get_message_id(summary)) is not None:
                state.produced.append(summary_id)
            state.session.add_summary(summary)
            for priced in state.run.add_summary(summary):
                await self._report(priced, state)

    async def _bill_cache(
        self, ctx: RunContext[Any], request_context: ModelRequestContext, response: ModelResponse, state: RunCost
    ) -> None:
        """Bill the request through the conversation's simulated cache, stamp the response, report a collapse."""
        model = self.price_as or model_label(response.model_name, response.provider_name)
        conversation = getattr(ctx, "conversation_id", None)
        track = self._shared.caches.get(conversation, model, self.prompt_cache, request_context.model_settings)
        state.cached = track.bill(request_context, response, reported=is_reported(model, response, self.price_as))
        if (collapse := track.collapse(state.cached, NAME)) is not None:
            await emit_event(self.event_callback, collapse)

    def _estimate(self, state: RunCost, request_context: ModelRequestContext) -> NextRequest:
        model = self.price_as or getattr(request_context.model, "model_name", None)
        provider = None if self.price_as else getattr(request_context.model, "system", None)
        return estimate_next(state.counted, state.last, model, provider)

    async def _check_budgets(self, ctx: RunContext[Any], state: RunCost, next_request: NextRequest) -> None:
        run, session = state.run.totals().total, state.session.totals().total
        for limit in self._limits:
            spent, more = limit.spent(run, session), next_request.amount(limit)
            if spent + more <= limit.limit:
                continue
            request = state.requests + 1
            await emit_event(self.event_callback, BudgetExceeded(NAME, limit.name, limit.limit, spent, more, request))
            raise BudgetExceededError(
                budget=limit.name,
                limit=limit.limit,
                spent=spent,
                estimated_request=more,
                request=request,
                messages=list(ctx.messages),
            )

    async def _warn(self, state: RunCost, next_request: NextRequest, request_context: ModelRequestContext) -> None:
        run, session = state.run.totals().total, state.session.totals().total
        notes: list[str] = []
        for limit in self._limits:
            spent = limit.spent(run, session)
            if limit.name in state.warned or spent < limit.limit * Decimal(str(self.warn_fraction)):
                continue
            state.warned.add(limit.name)
            text = f"{limit.name}: {amount_text(spent)} of {amount_text(limit.limit)} spent"
            notes.append(text)
            await emit_event(self.event_callback, BudgetWarningIssued(NAME, limit.name, limit.limit, spent, text))
        if notes and self.warn_model:
            _tell_model(request_context, "Budget warning: " + "; ".join(notes) + ". Finish the task soon.")

    async def _report(self, priced: Priced, state: RunCost) -> None:
        run, session = state.run.totals(), state.session.totals()
        with self._shared.lock:
            self._shared.run_totals, self._shared.session_totals = run, session
        spend = priced.spend
        cached = state.cached if priced.kind != "summarizer" else None
        read, write = (cached.cache_read_tokens, cached.cache_write_tokens) if cached else (0, 0)
        event = CostRecorded(
            NAME,
            priced.kind,
            priced.model,
            spend.input_tokens,
            read if cached else spend.cache_read_tokens,
            write if cached else spend.cache_write_tokens,
            spend.output_tokens,
            spend.cost_usd,
            run.total.cost_usd,
            session.total.cost_usd,
            run.total.total_tokens,
            session.total.total_tokens,
            cached.uncached_tokens if cached else None,
            cached.source if cached else None,
        )
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes({**_span_attributes("cost.run", run), **_span_attributes("cost.session", session)})
        await emit_event(self.event_callback, event)
        if self.on_cost is not None:
            try:
                result = self.on_cost(event)
                if isinstance(result, Awaitable):
                    await result
            except Exception as exc:
                logger.exception("on_cost callback %r failed; the run continues", self.on_cost)
                await emit_event(self.event_callback, CallbackFailed(NAME, "on_cost", f"{type(exc).__name__}: {exc}"))


def _previous_request(messages: list[ModelMessage]) -> tuple[RequestUsage, int] | None:
    """The latest response of the history the run continues, with our count of what it answered: the first
    request of a run is estimated from it like any other."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ModelResponse) and message.usage.input_tokens:
            return message.usage, count_tokens_approximately(messages[:i])
    return None


def _tell_model(request_context: ModelRequestContext, text: str) -> None:
    """Add `text` to this request only (the history keeps no trace of it)."""
    messages = request_context.messages
    if messages and isinstance(messages[-1], ModelRequest):
        last = messages[-1]
        messages[-1] = replace(last, parts=[*last.parts, SystemPromptPart(text)])


def _span_attributes(prefix: str, totals: CostTotals) -> dict[str, Any]:
    total = totals.total
    attributes: dict[str, Any] = {
        f"{prefix}.requests": total.requests,
        f"{prefix}.input_tokens": total.input_tokens,
        f"{prefix}.output_tokens": total.output_tokens,
        f"{prefix}.cache_read_tokens": total.cache_read_tokens,
        f"{prefix}.summarizer_requests": totals.summarizer.requests,
    }
    if total.cost_usd is not None:
        attributes[f"{prefix}.cost_usd"] = float(total.cost_usd)
    return attributes
