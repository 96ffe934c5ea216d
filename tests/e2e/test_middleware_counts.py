"""The middleware's token count comes from the same history check as its recording: it must equal what the
counter itself says, whatever happened to the history between two calls."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from summarization_pydantic_ai import ContextManagerMiddleware, IncrementalCounter, estimate_message_tokens


def _message(i: int, text: str) -> ModelMessage:
    if i % 2 == 0:
        return ModelRequest(parts=[UserPromptPart(f"{text} {i} " * (i % 7 + 1))])
    return ModelResponse(parts=[TextPart(f"{text} {i} " * (i % 5 + 1))])


def _fresh_count(messages: list[ModelMessage]) -> int:
    return IncrementalCounter(estimate_message_tokens).count(list(messages))


def _doubled(message: ModelMessage) -> int:
    return 2 * estimate_message_tokens(message)


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4)),
        st.tuples(st.just("edit"), st.integers(0, 100)),  # another object, same id (dataclasses.replace)
        st.tuples(st.just("mutate_last"), st.integers(0, 100)),  # the same object, a part reassigned
        st.tuples(st.just("truncate"), st.integers(0, 100)),
        st.tuples(st.just("copy"), st.integers(0, 1)),  # a new list holding the same messages
    ),
    min_size=1,
    max_size=10,
)


async def _scenario(
    middlewares: list[tuple[ContextManagerMiddleware, int]], start: int, ops: list[tuple[str, int]]
) -> None:
    """Apply `ops` to a history; after each, every middleware (with the factor of its counter) is called and must
    report its counter's count of the history as it is now."""
    messages = [_message(i, "start") for i in range(start)]
    for step, (op, arg) in enumerate(ops):
        if op == "append":
            messages += [_message(len(messages) + k, f"step {step}") for k in range(arg)]
        elif op == "edit":
            i = arg % len(messages)
            messages[i] = dataclasses.replace(messages[i], parts=[*_message(i, f"edited {step}").parts])
        elif op == "mutate_last":
            messages[-1].parts[0] = _message(len(messages) - 1, f"mutated {step}").parts[0]
        elif op == "truncate":
            del messages[max(1, arg % len(messages)) :]
        else:
            messages = list(messages)
        for middleware, factor in middlewares:
            await middleware(messages)
            usage = middleware.usage
            assert usage is not None and usage.tokens == factor * _fresh_count(messages)


def _middleware(path: Path | None, counter: IncrementalCounter | None = None) -> ContextManagerMiddleware:
    if counter is None:
        return ContextManagerMiddleware(messages_path=path, summarization_model=None, max_tokens=10**12)
    return ContextManagerMiddleware(
        messages_path=path, summarization_model=None, max_tokens=10**12, token_counter=counter
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.integers(1, 30), ops=_ops, custom=st.booleans())
def test_reported_tokens_equal_a_fresh_count(
    tmp_path_factory: pytest.TempPathFactory, start: int, ops: list[tuple[str, int]], custom: bool
) -> None:
    path = tmp_path_factory.mktemp("counts") / "messages.json"
    counter = IncrementalCounter(_doubled) if custom else None
    asyncio.run(_scenario([(_middleware(path, counter), 2 if custom else 1)], start, ops))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.integers(1, 30), ops=_ops, persist=st.booleans())
def test_middlewares_with_different_counters_on_one_store_each_report_their_own(
    tmp_path_factory: pytest.TempPathFactory, start: int, ops: list[tuple[str, int]], persist: bool
) -> None:
    # One recording cursor per history and store (no store: one for all): the counts it keeps belong to one
    # counter at a time, and the other counter measures again.
    path = tmp_path_factory.mktemp("counts") / "messages.json" if persist else None
    middlewares = [(_middleware(path), 1), (_middleware(path, IncrementalCounter(_doubled)), 2)]
    asyncio.run(_scenario(middlewares, start, ops))
