"""Trailing unanswered requests: a history that ends with several requests nobody answered (a chat whose model
calls failed, prompts queued while offline) can be cut between those requests, so windows and summaries shrink it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    CompactionSkipped,
    ContextEvent,
    ContextManagerMiddleware,
    SlidingWindowProcessor,
    SummarizationProcessor,
    find_safe_cutoff,
    is_summary_message,
    validate_history,
)
from summarization_pydantic_ai._cutoff import inflight_start


def requests(n: int, start: int = 0) -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart(f"Message {i}")]) for i in range(start, start + n)]


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart)]


def test_the_peer_case_cuts_between_unanswered_requests() -> None:
    reqs = requests(10)
    assert find_safe_cutoff(reqs, 3) == 7
    assert find_safe_cutoff(reqs, 0) == 9  # the newest request is the one in flight
    assert find_safe_cutoff(reqs, ("tokens", 0)) == 9
    assert find_safe_cutoff(reqs, 10) == 0
    assert inflight_start(reqs) == 9


def test_a_run_after_an_answer_is_cut_too_and_a_final_response_keeps_its_request() -> None:
    messages = [*requests(2), ModelResponse(parts=[TextPart("ok")]), *requests(5, start=2)]
    assert find_safe_cutoff(messages, 2) == len(messages) - 2
    finished = [*requests(6), ModelResponse(parts=[TextPart("all read")])]
    assert find_safe_cutoff(finished, 0) == 5  # the answer and the request right before it
    assert find_safe_cutoff(finished, 3) == 4


def test_no_cut_inside_a_run_while_a_tool_call_is_open() -> None:
    call_x = ToolCallPart("grep", {"p": "x"}, "x")
    call_y = ToolCallPart("grep", {"p": "y"}, "y")
    messages: list[ModelMessage] = [
        *requests(1),
        ModelResponse(parts=[call_x, call_y]),  # 1
        ModelRequest(parts=[ToolReturnPart("grep", "x found", "x")]),  # 2
        *requests(2, start=1),  # 3, 4: the call y is still open across them
        ModelRequest(parts=[ToolReturnPart("grep", "y found", "y")]),  # 5
    ]
    for keep in range(6):
        assert find_safe_cutoff(messages, keep) <= 1  # every cut inside the run would orphan a result
    closed = [*messages[:3], *requests(3, start=1)]  # both calls answered: cuts between the prompts are safe
    closed[1] = ModelResponse(parts=[call_x])
    assert find_safe_cutoff(closed, 2) == 4
    assert find_safe_cutoff(closed, 0) == 5


async def test_sliding_window_shrinks_a_run_of_unanswered_requests() -> None:
    reqs = requests(10)
    out = await SlidingWindowProcessor(trigger=("messages", 5), keep=3)(reqs)
    assert len(out) == 4 and is_summary_message(out[0])
    assert out[1:] == reqs[7:]
    assert validate_history(out) == []


async def test_summarization_shrinks_a_run_of_unanswered_requests() -> None:
    reqs = requests(10)
    out = await SummarizationProcessor(None, trigger=("messages", 5), keep=2)(reqs)
    assert len(out) == 3 and is_summary_message(out[0])
    assert out[1:] == reqs[8:]
    assert validate_history(out) == []


async def test_the_middleware_compacts_a_chat_whose_model_calls_failed(tmp_path: Path) -> None:
    """Eight turns fail (HTTP 500): their prompts stay in the history, unanswered. A compaction at the ninth
    turn replaces them with a summary; before, it was skipped as "nothing new to summarize"."""
    sent: list[list[ModelMessage]] = []
    failing = True

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(messages)
        if failing:
            raise ModelHTTPError(500, "scripted", {"error": "server error"})
        return ModelResponse(parts=[TextPart("back online")])

    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(
        max_tokens=100_000,
        summarization_model=None,
        messages_path=tmp_path / "messages.json",
        event_callback=events.append,
    )
    agent = Agent(FunctionModel(model), capabilities=[middleware])
    history: list[ModelMessage] = []
    for i in range(8):
        async with agent.iter(f"queued prompt {i}", message_history=history) as run:
            try:
                async for _ in run:
                    pass
            except ModelHTTPError:
                history = run.all_messages()
    assert len(prompts(history)) == 8
    failing = False
    middleware.request_compact()
    result = await agent.run("are you there?", message_history=history)
    assert result.output == "back online"
    assert not [e for e in events if isinstance(e, CompactionSkipped)]
    last_sent = sent[-1]
    assert any(isinstance(p, CompactionPart) for m in last_sent for p in m.parts)
    assert prompts(last_sent) == ["are you there?"]  # the eight queued prompts are in the summary
    assert validate_history(result.all_messages(), for_request=False) == []
