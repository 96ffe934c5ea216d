"""`ContextConfig`: one object that names a context strategy and builds the capability stack that implements it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_args

from pydantic_ai.capabilities import AbstractCapability

from .._cache_policy import CachePolicy
from .._events import ContextEvent, EventCallback, emit_event
from .._windows import resolve_max_tokens
from ..compression import LEVELS, CompressionLevel
from ..context_manager import ContextManagerMiddleware
from ..metrics import ContextMetrics
from ..phases import PhaseCheckpoints
from ..summarize import RUN_MODEL
from ._stacks import ERRORS_KEPT, StoreSource, build_steps

__all__ = ["DEFAULT_TARGETS", "STRATEGIES", "CompressionLevel", "ContextConfig", "Strategy"]

Strategy: TypeAlias = Literal["sliding_window", "checkpoint", "hybrid", "summarize"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
_LEVELS: tuple[str, ...] = tuple(LEVELS)
DEFAULT_TARGETS: dict[str, float] = {"sliding_window": 0.15, "checkpoint": 0.2, "hybrid": 0.3, "summarize": 0.3}
"""Each strategy's default `target`, tuned for cost with the prompt cache counted at equal or better probe scores
(docs/strategies.md): a reduction rare and deep, its kept part thinned, costs less than frequent shallow ones."""
_SAFETY_THRESHOLD = 0.95
"""Where the middleware's deterministic compaction catches what a zero-LLM strategy let through (a last resort)."""
_SAFETY_MARGIN = 0.03
"""With a cache policy, the last resort sits this far above the policy's limit (where the strategy's own steps
reduce), so that it catches only what they let through."""


@dataclass
class ContextConfig:
    """A context strategy and its settings, validated at construction; builds the matching capability stack.

    Every strategy first compresses old tool outputs (`MessageCompressor` at `compression_level`: page snapshots
    to `snapshot_depth` keeping every interactive element, console logs with repeats collapsed and errors kept,
    JSON to its shape), then:

    - `sliding_window`: drops the oldest messages (pair-safe, with a marker) when a request reaches `trigger` of
      the window, down to `target`. No model call.
    - `checkpoint`: when a phase is marked done (`checkpoints.mark_done(...)`, or the model's `complete_phase`
      tool), rebuilds the context as the instructions plus one checkpoint message, the phase archived in the
      history store; the sliding window catches what a long phase adds. No model call.
    - `hybrid`: phase checkpoints (with `checkpoint_phases`), then `ImportancePruner` from `trigger` down to
      `target` (errors, state changes, user instructions, recent and referenced messages score high; nothing
      scoring `importance_threshold` or more is dropped), then the sliding window at 90% as a backstop. No model
      call.
    - `summarize`: at `trigger` of the window, `ContextManagerMiddleware` summarizes the old part with
      `summarization_model` (the run's own model by default): the one strategy that calls an LLM.

    `capabilities()` is the whole stack for a plain `Agent` (metrics first, then `processors()`, then
    `middleware()`); `create_deep_agent(context=config)` puts `processors()` in the user-processor slot of the
    spine and uses `middleware()` as its context manager. Every zero-LLM strategy keeps the middleware's last-resort
    compaction (at 95% of the window) deterministic: it never calls a model either.

    Example:
        ```python
        config = ContextConfig('sliding_window', max_tokens=32_000)
        agent = Agent('openai:gpt-4.1', capabilities=config.capabilities())
        ...
        print(config.metrics.summary())
        ```
    """

    strategy: Strategy = "sliding_window"
    max_tokens: int | None = None
    """The context window in tokens; default: the model's (from `model_name`, or the model passed to the builders
    or the run's), else 200,000."""
    model_name: str | None = None
    """The agent's model name, to look its context window up when `max_tokens` is not set."""
    trigger: float = 0.8
    """The strategy acts when a request reaches this fraction of the window."""
    target: float | None = None
    """What a reduction aims for, as a fraction of the window (below `trigger`); `None`: the strategy's default
    (`DEFAULT_TARGETS`: 0.15 to 0.3)."""
    window_size: int | None = None
    """The most messages the working context may hold (the sliding window also slides on count, keeping half);
    `None`: tokens only."""
    preserve_errors: bool = True
    """Keep failed tool exchanges: the 3 most recent through every slide and summary, all of them through
    importance pruning."""
    compression_level: CompressionLevel = "medium"
    """How hard tool outputs are compressed before anything is dropped: `none`, `low`, `medium`, `high` (see
    `compression.LEVELS`)."""
    snapshot_depth: int | None = None
    """The depth page snapshots are compressed to (every interactive element is kept); default: the level's."""
    checkpoint_phases: Sequence[str] = ()
    """The phase names of the task, in order (`checkpoint`, and `hybrid` with phases): marking another name done
    is refused. Empty: any name (`checkpoint`); no checkpoints (`hybrid`)."""
    importance_threshold: float | None = None
    """`hybrid`: importance pruning never drops a unit scoring at least this (see `ImportanceWeights`); `None`: no
    threshold."""
    summarization_model: Any = RUN_MODEL
    """The summary model of the `summarize` strategy (see `ContextManagerMiddleware.summarization_model`)."""
    event_callback: EventCallback | None = None
    """Receives every event of the stack (the metrics receive them too)."""
    cache_policy: CachePolicy | None = field(default_factory=CachePolicy)
    """When the reductions happen, by what they cost with the prompt cache counted (`CachePolicy`: Anthropic's
    prices by default; `CachePolicy.for_model(...)` for another provider's); `None`: at `trigger`, every time."""
    metrics: ContextMetrics | None = field(default_factory=ContextMetrics)
    """Records the stack's reductions; `None` leaves metrics out of `capabilities()`."""
    checkpoints: PhaseCheckpoints | None = field(default=None, init=False, repr=False, compare=False)
    """The `PhaseCheckpoints` of the stack built last (`checkpoint`, and `hybrid` with phases): call its
    `mark_done(...)` when a phase is done, or let the model call its `complete_phase` tool."""

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; use one of {', '.join(STRATEGIES)}")
        if self.compression_level not in _LEVELS:
            raise ValueError(f"unknown compression_level {self.compression_level!r}; use one of {', '.join(_LEVELS)}")
        _check_int("max_tokens", self.max_tokens, minimum=1_000, optional=True)
        _check_int("window_size", self.window_size, minimum=4, optional=True)
        _check_int("snapshot_depth", self.snapshot_depth, minimum=1, optional=True)
        _check_fraction("trigger", self.trigger)
        if self.target is None:
            self.target = min(DEFAULT_TARGETS[self.strategy], self.trigger / 2)
        _check_fraction("target", self.target)
        if self.target >= self.trigger:
            raise ValueError(f"target ({self.target}) must be below trigger ({self.trigger}): a reduction must fit")
        self.checkpoint_phases = _check_phases(self.checkpoint_phases)
        if self.importance_threshold is not None:
            value: Any = self.importance_threshold
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"importance_threshold must be a positive number or None, got {value!r}")
        if self.metrics is not None:
            if not isinstance(self.metrics, ContextMetrics):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(f"metrics must be a ContextMetrics or None, got {self.metrics!r}")
            if self.metrics.strategy is None:
                self.metrics.strategy = self.strategy

    @property
    def target_fraction(self) -> float:
        """`target` as resolved at construction (the strategy's default when it was `None`)."""
        assert self.target is not None
        return self.target

    # -- builders ------------------------------------------------------------------------------------------------

    def window(self, model: Any = None) -> int | None:
        """The context window the stack works against: `max_tokens`, else `model_name`'s or `model`'s (`None`
        when unknown: then each capability looks the run's model up)."""
        if self.max_tokens is not None:
            return self.max_tokens
        for candidate in (self.model_name, model):
            if candidate is not None and (found := resolve_max_tokens(candidate)) is not None:
                return found
        return None

    def processors(self, model: Any = None, *, history_store: StoreSource = None) -> list[AbstractCapability[Any]]:
        """The strategy's steps, in order (the user-processor slot of the spine): compress tool outputs, then
        checkpoint phases, prune by importance, slide the window, as the strategy has them. `history_store`: where
        phase checkpoints archive (the middleware's store, or a function of the run context returning one)."""
        steps = build_steps(self, self.window(model), self._callback(), history_store)
        for step in steps:
            if isinstance(step, PhaseCheckpoints):
                self.checkpoints = step
        return steps

    def middleware(self, model: Any = None, **overrides: Any) -> ContextManagerMiddleware:
        """The `ContextManagerMiddleware` of the strategy (persist, count, compress); `overrides` are passed on
        (e.g. `messages_path=`). Zero-LLM strategies get the deterministic summarizer at 95% of the window."""
        llm = self.strategy == "summarize"
        settings: dict[str, Any] = {
            "max_tokens": self.window(model),
            "model_name": self.model_name,
            "compress_threshold": self.trigger if llm else self._safety_threshold(),
            "keep": ("fraction", self.target_fraction / 2) if llm else ("messages", 0),
            "summarization_model": self.summarization_model if llm else None,
            "keep_errors": ERRORS_KEPT if self.preserve_errors else 0,
            "event_callback": self._callback(),
            "cache_policy": self.cache_policy if llm else None,  # a last resort is not planned: it catches
        }
        settings.update(overrides)
        return ContextManagerMiddleware(**settings)

    def capabilities(self, model: Any = None, **middleware_overrides: Any) -> list[AbstractCapability[Any]]:
        """The whole stack for a plain `Agent`: the metrics (outermost), the processors, the middleware."""
        middleware = self.middleware(model, **middleware_overrides)
        stack: list[AbstractCapability[Any]] = [self.metrics] if self.metrics is not None else []
        return [*stack, *self.processors(model, history_store=middleware.store), middleware]

    def _safety_threshold(self) -> float:
        if self.cache_policy is None:
            return _SAFETY_THRESHOLD
        return min(1.0, max(_SAFETY_THRESHOLD, self.cache_policy.limit + _SAFETY_MARGIN))

    def _callback(self) -> EventCallback | None:
        """The metrics' recorder and the user's callback, both."""
        metrics, user = self.metrics, self.event_callback
        if metrics is None:
            return user
        if user is None:
            return metrics.record

        async def both(event: ContextEvent) -> None:
            metrics.record(event)
            await emit_event(user, event)

        return both


def _check_int(name: str, value: Any, *, minimum: int, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}{' or None' if optional else ''}, got {value!r}")


def _check_fraction(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ValueError(f"{name} must be a fraction of the window in (0, 1), got {value!r}")


def _check_phases(phases: Any) -> tuple[str, ...]:
    if isinstance(phases, str):
        raise TypeError("checkpoint_phases must be a sequence of names, e.g. ('login', 'cart'), not a string")
    names = tuple(phases)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"checkpoint_phases must hold non-empty names, got {name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"checkpoint_phases must be unique, got {list(names)}")
    return names
