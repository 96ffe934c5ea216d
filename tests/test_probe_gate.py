"""The CI quality gate (issue 23, scope 5): every compaction path, on both session families (coding and data
analysis, written independently), keeps at least a minimum of each probe category in the working context.

The minimums are what each path measured when the gate was set (400 messages, seed 7), rounded down: a change
that makes a path forget more fails here. The deterministic summary paths are held to 90% in every category.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    PhaseCheckpoints,
    SlidingWindowProcessor,
    SummarizationProcessor,
    count_tokens_approximately,
)
from summarization_pydantic_ai._sizes import Measure
from summarization_pydantic_ai.context_manager._overflow import Ladder
from summarization_pydantic_ai.evals import CompactFn, Session, arun_probes, build_family_session

BUDGET = 200_000
CATEGORIES = ("file_paths", "todo_state", "last_request", "decisions", "errors")


def _summarization(session: Session) -> CompactFn:
    return SummarizationProcessor(None, trigger=("messages", 21), keep=("messages", 20))


def _middleware(session: Session) -> CompactFn:
    return ContextManagerMiddleware(max_tokens=BUDGET, keep=("messages", 20), summarization_model=None).compact


def _sliding(session: Session) -> CompactFn:
    return SlidingWindowProcessor(trigger=("messages", 21), keep=("messages", 20))


def _summarization_replayed(session: Session) -> CompactFn:
    return SummarizationProcessor(None, trigger=("messages", 100), keep=("messages", 20))


def _middleware_replayed(session: Session) -> CompactFn:
    return ContextManagerMiddleware(max_tokens=20_000, keep=("messages", 20), summarization_model=None)


def _agent_driven_fallback(session: Session) -> CompactFn:
    """`AgentDrivenCompression` falls back, when the agent wrote no memory, to the middleware keeping half its
    target in tokens (here 10% of a 50,000-token budget)."""
    return ContextManagerMiddleware(max_tokens=50_000, keep=("tokens", 5_000), summarization_model=None).compact


def _overflow_ladder(session: Session) -> CompactFn:
    """The overflow ladder asked to bring the history to a fifth of its size (the provider said it is too long)."""
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=BUDGET)

    async def estimate(history: list[ModelMessage]) -> int:
        return count_tokens_approximately(history)

    async def summarize(history: list[ModelMessage], tokens: int) -> list[ModelMessage]:
        size = Measure(len(history), tokens, BUDGET)
        return await middleware._compress(history, size, BUDGET, None, None, None)  # pyright: ignore[reportPrivateUsage]

    async def compact(messages: list[ModelMessage]) -> list[ModelMessage]:
        tokens = count_tokens_approximately(messages)
        ladder = Ladder(estimate, count_tokens_approximately, BUDGET, summarize)
        return (await ladder.run(list(messages), tokens, tokens // 5)).messages

    return compact


def _phase_checkpoint(session: Session) -> CompactFn:
    """The work before the latest request is a phase, marked done when that request arrives (replayed)."""
    phases = PhaseCheckpoints()
    latest = next(
        m
        for m in reversed(session.messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
    )

    async def compact(messages: list[ModelMessage]) -> list[ModelMessage]:
        if messages and messages[-1] == latest and not phases.completed:
            phases.mark_done("before the latest request", state={"note": "the earlier work is archived"})
        return await phases(messages)

    return compact


# path -> (make, replay, {family: {category: minimum}}). A missing category has no minimum (0).
DETERMINISTIC = dict.fromkeys(CATEGORIES, 0.9)
PATHS: dict[str, tuple[Callable[[Session], CompactFn], bool, dict[str, dict[str, float]]]] = {
    "summarization": (_summarization, False, {"coding": DETERMINISTIC, "analysis": DETERMINISTIC}),
    "middleware": (_middleware, False, {"coding": DETERMINISTIC, "analysis": DETERMINISTIC}),
    "summarization, replayed": (_summarization_replayed, True, {"coding": DETERMINISTIC, "analysis": DETERMINISTIC}),
    "middleware, replayed": (_middleware_replayed, True, {"coding": DETERMINISTIC, "analysis": DETERMINISTIC}),
    "agent-driven fallback": (_agent_driven_fallback, False, {"coding": DETERMINISTIC, "analysis": DETERMINISTIC}),
    "overflow ladder": (
        _overflow_ladder,
        False,
        {
            "coding": {"file_paths": 1.0, "todo_state": 1.0, "last_request": 1.0, "decisions": 0.9, "errors": 0.6},
            "analysis": {"file_paths": 1.0, "todo_state": 1.0, "last_request": 1.0, "decisions": 0.9, "errors": 0.3},
        },
    ),
    "sliding": (
        _sliding,
        False,
        {
            "coding": {"file_paths": 0.1, "todo_state": 1.0, "last_request": 1.0, "errors": 0.1},
            "analysis": {"file_paths": 0.05, "last_request": 1.0, "errors": 0.1},
        },
    ),
    "phase checkpoint": (
        _phase_checkpoint,
        True,
        {"coding": {"last_request": 1.0}, "analysis": {"last_request": 1.0}},
    ),
}


@pytest.mark.parametrize("family", ["coding", "analysis"])
@pytest.mark.parametrize("path", list(PATHS))
async def test_every_compaction_path_keeps_its_minimum_per_category(path: str, family: str) -> None:
    make, replay, minimums = PATHS[path]
    session = build_family_session(family, 400, 7)
    report = await arun_probes(make(session), session, replay=replay, name=path)
    working = {c.category: c.working / c.probes for c in report.categories()}
    below: dict[str, Any] = {
        category: f"{working[category]:.0%} < {minimum:.0%}"
        for category, minimum in minimums[family].items()
        if working[category] < minimum
    }
    assert not below, f"{path} on {family}: {below}\n{report.table()}"
    assert report.problems == []
    assert report.tokens_after < report.tokens_before
