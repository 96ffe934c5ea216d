"""`RecordingModel`: it records what it received (copies that later changes cannot reach), shares the copies of
unchanged messages between records, answers and counts summary requests, and keeps a virtual clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo

from summarization_pydantic_ai import ContextManagerMiddleware, is_summary_message, render_messages
from summarization_pydantic_ai.cache import CacheReport, CacheSimulator
from summarization_pydantic_ai.evals import RecordingModel


class _Reader:
    """Reads three pages, one per request, then answers (per run)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step, self.calls = self.calls % 4, self.calls + 1
        if step < 3:
            return ModelResponse(parts=[ToolCallPart("page", {"number": step}, tool_call_id=f"c{self.calls}")])
        return ModelResponse(parts=[TextPart("read them all")])


def _agent(recorder: RecordingModel, **kwargs: object) -> Agent[None, str]:
    agent = Agent(recorder.model(), instructions="Read the pages.", **kwargs)  # type: ignore[arg-type]

    @agent.tool_plain
    def page(number: int) -> str:  # pyright: ignore[reportUnusedFunction]
        """One page of the book."""
        return f"page {number}: " + "words " * 400

    return agent


async def test_records_copies_of_what_it_received_with_instructions_and_tools() -> None:
    recorder = RecordingModel(_Reader())
    result = await _agent(recorder).run("read the book")
    assert [r.turn for r in recorder.requests] == [0, 1, 2, 3]
    assert [len(r.messages) for r in recorder.requests] == [1, 3, 5, 7]
    first = recorder.requests[0]
    assert first.instructions == "Read the pages." and [t.name for t in first.tool_definitions] == ["page"]
    prompt = result.all_messages()[0].parts[0]
    assert isinstance(prompt, UserPromptPart)
    prompt.content = "changed after the run"
    recorded = first.messages[0].parts[0]
    assert isinstance(recorded, UserPromptPart) and recorded.content == "read the book"
    assert first.tokens > 0 and first.output_tokens > 0


async def test_unchanged_messages_are_shared_between_records_so_a_cache_sees_no_rewrite() -> None:
    recorder = RecordingModel(_Reader())
    await _agent(recorder).run("read the book")
    before, after = recorder.requests[1].messages, recorder.requests[2].messages
    assert all(a is b for a, b in zip(before, after[: len(before)], strict=True))
    simulator = CacheSimulator.for_model("anthropic:claude-sonnet-4-5", min_cacheable_tokens=0)
    report = CacheReport.of(simulator.simulate(r.sent_request() for r in recorder.requests))
    assert report.rewrites == 0 and report.tokens.cache_read_tokens > 0


async def test_answers_summary_requests_with_a_valid_summary_and_counts_them() -> None:
    recorder = RecordingModel(_Reader())
    middleware = ContextManagerMiddleware(max_tokens=3_000, compress_threshold=0.6)
    result = await _agent(recorder, capabilities=[middleware]).run("read the book")
    assert recorder.summary_requests >= 1
    assert len(recorder.turn_requests) == 4, "summary requests do not take a turn of the script"
    summaries = [m for m in result.all_messages() if isinstance(m, ModelRequest) and is_summary_message(m)]
    assert summaries, "the model's summary was accepted (not replaced by the deterministic one)"
    text = render_messages(summaries[-1:])
    assert "## Current state" in text and "## Latest user request\nread the book" in text
    assert "The session so far." in text


async def test_the_virtual_clock_advances_per_request_and_on_pause() -> None:
    recorder = RecordingModel(_Reader(), seconds_per_request=10)
    agent = _agent(recorder)
    result = await agent.run("read the book")
    recorder.pause(300)
    await agent.run("again", message_history=result.all_messages())
    stamps = [r.timestamp for r in recorder.requests]
    assert stamps[1] - stamps[0] == timedelta(seconds=10)
    assert stamps[4] - stamps[3] == timedelta(seconds=310)
    with pytest.raises(ValueError, match="0 or more"):
        recorder.pause(-1)
