"""Property tests: histories with runs of requests (failed model calls, prompts queued offline) and runs of
responses (answers streamed in several messages, a retried generation) are cut, windowed and summarized into
valid histories, and a trailing run of unanswered requests shrinks like any other messages.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import pydantic_ai.models
from commit_check import tokens, without_commit_check
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from strategies import histories, keeps, summarization_configs

from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    SlidingWindowProcessor,
    SummarizationProcessor,
    find_safe_cutoff,
    is_summary_message,
    validate_history,
)

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))


def built(compact: Any, messages: list[ModelMessage], out: list[ModelMessage]) -> list[ModelMessage]:
    """What `compact` built: `out` when it was committed (smaller), else what it would have committed without the
    check that a compaction never grows the context (which must then not be smaller)."""
    if out != messages:
        assert tokens(out) < tokens(messages)
        return out
    with without_commit_check():
        forced = asyncio.run(compact(messages))
    assert tokens(forced) >= tokens(messages) or forced == messages
    return forced


EXAMPLES = settings(max_examples=int(300 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])

_counter = iter(range(10**9))


def _prompt() -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(f"queued prompt {next(_counter)} " + "word " * 20)])


def _answer() -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"partial answer {next(_counter)} " + "text " * 20)])


def _opens_calls(message: ModelMessage) -> bool:
    return isinstance(message, ModelResponse) and any(isinstance(p, ToolCallPart) for p in message.parts)


@st.composite
def histories_with_runs(draw: Any, *, for_request: bool = True) -> list[ModelMessage]:
    """A valid history with runs spliced in where no tool call is open: extra unanswered user requests before a
    response (or at the end), and extra text responses before a response (never after one that made calls)."""
    messages = list(draw(histories(for_request=for_request, max_turns=4, max_steps=3)))
    responses = [i for i, m in enumerate(messages) if isinstance(m, ModelResponse)]
    inserts: dict[int, list[ModelMessage]] = {}
    for i in draw(st.lists(st.sampled_from(responses), max_size=3)) if responses else []:
        if not _opens_calls(messages[i - 1]):  # a response after calls would orphan them
            inserts.setdefault(i, []).extend(_answer() for _ in range(draw(st.integers(1, 3))))
    for i in draw(st.lists(st.sampled_from(responses), max_size=3)) if responses else []:
        if not _opens_calls(messages[i - 1]):  # a request between a call and its result would split the pair
            inserts.setdefault(i, []).extend(_prompt() for _ in range(draw(st.integers(1, 4))))
    out: list[ModelMessage] = []
    for i, message in enumerate(messages):
        out.extend(inserts.get(i, ()))
        out.append(message)
    if for_request:
        out.extend(_prompt() for _ in range(draw(st.integers(0, 6))))
    return out


@st.composite
def queued_prompts(draw: Any) -> list[ModelMessage]:
    """Only unanswered requests (a chat whose every model call failed), optionally after a system prompt."""
    head: list[ModelMessage] = []
    if draw(st.booleans()):
        head = [ModelRequest(parts=[SystemPromptPart("You are terse.")])]
    return [*head, *(_prompt() for _ in range(draw(st.integers(1, 25))))]


def trailing_prompts(messages: Sequence[ModelMessage]) -> int:
    """How many plain user requests (no tool result, no summary) end the history."""
    n = 0
    for message in reversed(messages):
        if not (isinstance(message, ModelRequest) and all(isinstance(p, UserPromptPart) for p in message.parts)):
            break
        n += 1
    return n


def assert_valid(out: list[ModelMessage], before: list[ModelMessage]) -> None:
    for_request = isinstance(before[-1], ModelRequest)
    problems = validate_history(out, for_request=for_request)
    assert problems == [], [str(p) for p in problems]


@EXAMPLES
@given(st.booleans().flatmap(lambda r: st.tuples(st.just(r), histories_with_runs(for_request=r))))
def test_generated_histories_with_runs_are_valid(case: tuple[bool, list[ModelMessage]]) -> None:
    for_request, messages = case
    assert validate_history(messages, for_request=for_request) == []


@EXAMPLES
@given(histories_with_runs(), keeps())
def test_cutoffs_in_runs_are_pair_safe_and_cut_trailing_requests(messages: list[ModelMessage], keep: Any) -> None:
    cut = find_safe_cutoff(messages, keep, max_tokens=20_000)
    kept_calls = {p.tool_call_id for m in messages[cut:] for p in m.parts if isinstance(p, ToolCallPart)}
    kept_results = {p.tool_call_id for m in messages[cut:] for p in m.parts if isinstance(p, ToolReturnPart)}
    assert kept_results <= kept_calls
    assert cut < len(messages)
    run = trailing_prompts(messages)
    if isinstance(keep, int) and keep < run:
        assert cut == len(messages) - max(keep, 1)  # cut inside the run, exactly where the keep says


@EXAMPLES
@given(histories_with_runs(), summarization_configs(), st.booleans())
def test_windows_and_summaries_of_histories_with_runs_are_valid(
    messages: list[ModelMessage], config: dict[str, Any], window: bool
) -> None:
    processor = SlidingWindowProcessor(**config) if window else SummarizationProcessor(None, **config)
    out = asyncio.run(processor(messages))
    assert_valid(out, messages)
    assert out[-1] is messages[-1]


@EXAMPLES
@given(histories_with_runs(for_request=False), summarization_configs(), st.booleans())
def test_finished_runs_with_runs_stay_valid(messages: list[ModelMessage], config: dict[str, Any], window: bool) -> None:
    processor = SlidingWindowProcessor(**config) if window else SummarizationProcessor(None, **config)
    out = asyncio.run(processor(messages))
    assert validate_history(out, for_request=isinstance(out[-1], ModelRequest)) == []
    assert out[-1] is messages[-1]


@EXAMPLES
@given(queued_prompts(), st.integers(0, 30), st.booleans())
def test_a_run_of_queued_prompts_shrinks_to_the_keep(messages: list[ModelMessage], keep: int, window: bool) -> None:
    trigger = ("messages", keep + 2)
    processor = (
        SlidingWindowProcessor(trigger=trigger, keep=keep)
        if window
        else SummarizationProcessor(None, trigger=trigger, keep=keep)
    )
    out = asyncio.run(processor(messages))
    assert_valid(out, messages)
    prompts = len(messages) - (1 if isinstance(messages[0].parts[0], SystemPromptPart) else 0)
    if len(messages) < keep + 2 or prompts <= max(keep, 1):
        assert out == messages  # below the trigger, or nothing but the kept tail to replace
        return
    out = built(processor, messages, out)
    assert out[-max(keep, 1) :] == messages[-max(keep, 1) :]
    assert len(out) == max(keep, 1) + 1 + (len(messages) - prompts)  # system prompt + marker or summary + tail
    assert sum(is_summary_message(m) for m in out) == 1


@EXAMPLES
@given(histories_with_runs())
def test_the_middleware_compacts_histories_with_runs_into_valid_ones(messages: list[ModelMessage]) -> None:
    middleware = ContextManagerMiddleware(max_tokens=50_000, summarization_model=None)
    out = asyncio.run(middleware.compact(messages))
    assert_valid(out, messages)
    out = built(middleware.compact, messages, out)
    assert_valid(out, messages)
    assert out[-1] is messages[-1] or out[-1].parts[-len(messages[-1].parts) :] == messages[-1].parts
    if trailing_prompts(messages) > 1:
        assert len(out) < len(messages)  # the unanswered requests before the newest are summarized
