"""The capability stack of each strategy: which steps, in which order, with which settings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability

from .._cache_policy import CachePolicy
from .._events import EventCallback
from .._working_set import has_tool_error
from ..compression import CompressionLevel, MessageCompressor
from ..phases import PhaseCheckpoints
from ..processors import SlidingWindowProcessor
from ..pruning import ImportancePruner
from ..store import HistoryStore

__all__ = ["StackSettings", "StoreSource", "build_steps"]

StoreSource = HistoryStore | Callable[[RunContext[Any]], HistoryStore | None] | None
ERRORS_KEPT = 3
"""Recent failed tool exchanges a slide keeps verbatim when `preserve_errors` is on."""
_BACKSTOP = 0.9
"""Where the sliding window behind importance pruning slides (a fraction of the window), if pruning fell short."""


class StackSettings(Protocol):
    """What the stacks read of the strategy's settings (`ContextConfig`)."""

    @property
    def strategy(self) -> str: ...
    @property
    def model_name(self) -> str | None: ...
    @property
    def trigger(self) -> float: ...
    @property
    def target_fraction(self) -> float: ...
    @property
    def window_size(self) -> int | None: ...
    @property
    def preserve_errors(self) -> bool: ...
    @property
    def compression_level(self) -> CompressionLevel: ...
    @property
    def snapshot_depth(self) -> int | None: ...
    @property
    def checkpoint_phases(self) -> Sequence[str]: ...
    @property
    def importance_threshold(self) -> float | None: ...
    @property
    def cache_policy(self) -> CachePolicy | None: ...


@dataclass(frozen=True)
class _Build:
    config: StackSettings
    window: int | None
    callback: EventCallback | None
    history_store: StoreSource


def build_steps(
    config: StackSettings, window: int | None, callback: EventCallback | None, history_store: StoreSource
) -> list[AbstractCapability[Any]]:
    """The strategy's steps between eviction and the middleware, in order: compress, checkpoint, prune, slide."""
    build = _Build(config, window, callback, history_store)
    steps: list[AbstractCapability[Any]] = []
    if config.compression_level != "none":
        steps.append(_compressor(build))
    strategy = config.strategy
    if strategy == "sliding_window":
        steps += _sliding_window(build, config.trigger)
    elif strategy == "checkpoint":
        steps += [_checkpoints(build), *_sliding_window(build, config.trigger)]
    elif strategy == "hybrid":
        if config.checkpoint_phases:
            steps.append(_checkpoints(build))
        steps += [_pruner(build), *_sliding_window(build, max(_BACKSTOP, config.trigger))]
    return steps


def _compressor(build: _Build) -> MessageCompressor:
    config = build.config
    return MessageCompressor(
        level=config.compression_level, snapshot_depth=config.snapshot_depth, event_callback=build.callback
    )


def _checkpoints(build: _Build) -> PhaseCheckpoints:
    phases = build.config.checkpoint_phases
    return PhaseCheckpoints(
        history_store=build.history_store,
        phases=phases or None,
        event_callback=build.callback,
        cache_policy=build.config.cache_policy,
        max_tokens=build.window,
    )


def _pruner(build: _Build) -> ImportancePruner:
    config, window = build.config, build.window
    if window is None:
        raise ValueError(
            "the 'hybrid' strategy prunes to a token target: set ContextConfig(max_tokens=...) or model_name=, or "
            "pass the model to capabilities()/processors() (create_deep_agent passes its own)"
        )
    return ImportancePruner(
        target_tokens=max(int(config.target_fraction * window), 1),
        trigger_tokens=max(int(config.trigger * window), 1),
        protect_score=config.importance_threshold,
        keep_predicate=is_error_message if config.preserve_errors else None,
        event_callback=build.callback,
        cache_policy=config.cache_policy,
        max_tokens=window,
    )


def _sliding_window(build: _Build, trigger: float) -> list[SlidingWindowProcessor]:
    config = build.config
    common: dict[str, Any] = {
        "max_tokens": build.window,
        "model_name": config.model_name,
        "keep_errors": ERRORS_KEPT if config.preserve_errors else 0,
        "event_callback": build.callback,
        "cache_policy": config.cache_policy,
    }
    steps = [SlidingWindowProcessor(trigger=("fraction", trigger), keep=("fraction", config.target_fraction), **common)]
    if config.window_size is not None:
        by_count = SlidingWindowProcessor(
            trigger=("messages", config.window_size), keep=("messages", config.window_size // 2), **common
        )
        steps.append(by_count)
    return steps


is_error_message = has_tool_error
"""A request that reports a failed or retried tool call: importance pruning never drops it (`preserve_errors`)."""
