"""End-to-end: turns that fail leave unanswered requests; pydantic-ai merges them at the next run's start.

The merged request carries none of the recorded ids. The middleware splits it back into the recorded requests
(the model still gets one request), so the run continues the file's conversation and nothing is recorded twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    repair_messages,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    JsonHistoryStore,
    ensure_message_id,
    get_message_id,
    validate_history,
)


class FailsTwice:
    """A model that answers with HTTP 500 on its first two calls, then answers; it keeps what it was sent."""

    def __init__(self) -> None:
        self.sent: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(messages)
        if len(self.sent) <= 2:
            raise ModelHTTPError(500, "scripted", {"error": "server error"})
        return ModelResponse(parts=[TextPart(f"answer {len(self.sent)}")])

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield self(messages, info).text or ""


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]  # type: ignore[misc]


def recorded(path: Path) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_json(path.read_bytes())


def middleware_for(path: Path) -> ContextManagerMiddleware:
    return ContextManagerMiddleware(max_tokens=100_000, summarization_model=None, messages_path=path)


async def turn(agent: Agent[None, str], prompt: str, history: list[ModelMessage]) -> list[ModelMessage]:
    """One turn the way the chat drives it: on a model error the history keeps what the run committed."""
    async with agent.iter(prompt, message_history=history) as run:
        try:
            async for _ in run:
                pass
        except ModelHTTPError:
            return run.all_messages()
    assert run.result is not None
    return run.result.all_messages()


async def test_two_failed_turns_then_an_answer_continue_one_conversation(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    model = FailsTwice()
    agent = Agent(FunctionModel(model), capabilities=[middleware_for(path)])
    history: list[ModelMessage] = []
    for prompt in ("one", "two", "three"):
        history = await turn(agent, prompt, history)

    assert prompts(model.sent[-1]) == ["one", "two", "three"]  # the model got all three, as one request
    assert sum(isinstance(m, ModelRequest) for m in model.sent[-1]) == 1
    assert prompts(history) == ["one", "two", "three"] and history[-1].text == "answer 3"  # type: ignore[union-attr]
    assert validate_history(history, for_request=False) == []
    assert [get_message_id(m) for m in recorded(path)] == [get_message_id(m) for m in history]  # once each

    history = await turn(agent, "four", history)  # the run after: its history starts with the three again
    assert prompts(recorded(path)) == ["one", "two", "three", "four"]
    assert len(recorded(path)) == len(history) == 6


async def test_a_session_resumed_after_two_failed_turns_runs(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    agent = Agent(FunctionModel(FailsTwice()), capabilities=[middleware_for(path)])
    history: list[ModelMessage] = []
    for prompt in ("one", "two"):
        history = await turn(agent, prompt, history)
    JsonHistoryStore.open(path).close()  # the program ends

    model = FailsTwice()
    model.sent = [[], []]  # it failed in the first program; it answers now
    resumed = Agent(FunctionModel(model), capabilities=[middleware := middleware_for(path)])
    assert middleware.store is not None
    loaded = await middleware.store.load()
    assert prompts(loaded) == ["one", "two"]
    result = await resumed.run("three", message_history=loaded)
    assert prompts(model.sent[-1]) == ["one", "two", "three"]
    assert prompts(recorded(path)) == ["one", "two", "three"]
    assert validate_history(result.all_messages(), for_request=False) == []


async def test_many_turns_later_the_failed_turns_are_still_recorded_once(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    agent = Agent(FunctionModel(FailsTwice()), capabilities=[middleware_for(path)])
    history: list[ModelMessage] = []
    for i in range(60):  # the merged requests end up deep in the history, far from the file's latest records
        history = await turn(agent, f"turn {i}", history)
    records = recorded(path)
    assert prompts(records) == [f"turn {i}" for i in range(60)]
    assert len({get_message_id(m) for m in records}) == len(records) == len(history)


async def test_run_stream_after_two_failed_turns(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    model = FailsTwice()
    agent = Agent(FunctionModel(model, stream_function=model.stream), capabilities=[middleware_for(path)])
    history: list[ModelMessage] = []
    for prompt in ("one", "two"):
        history = await turn(agent, prompt, history)
    async with agent.run_stream("three", message_history=history) as stream:
        assert await stream.get_output() == "answer 3"
    messages = stream.all_messages()
    assert prompts(messages) == ["one", "two", "three"]
    assert validate_history(messages, for_request=False) == []
    records = recorded(path)
    assert [get_message_id(m) for m in records[:3]] == [get_message_id(m) for m in messages[:3]]
    assert len(records) == 4 and records[-1].text == "answer 3"  # type: ignore[union-attr]


async def test_a_merged_request_with_a_new_part_records_only_the_new_part(tmp_path: Path) -> None:
    """A history passed by hand: a recorded request left unanswered, then a request the file does not hold."""
    path = tmp_path / "messages.json"
    model = FailsTwice()
    agent = Agent(FunctionModel(model), capabilities=[middleware_for(path)])
    history = await turn(agent, "one", [])
    history.append(ModelRequest(parts=[UserPromptPart("added by hand")]))
    history = await turn(agent, "two", history)
    history = await turn(agent, "three", history)
    assert prompts(model.sent[-1]) == ["one", "added by hand", "two", "three"]
    assert prompts(recorded(path)) == ["one", "added by hand", "two", "three"]
    assert validate_history(history, for_request=False) == []


async def test_a_merged_request_keeps_a_reduction_made_since_it_was_recorded(tmp_path: Path) -> None:
    """A failed turn after a tool call, then another: the tool results and the prompt are merged; an evicted
    (reduced) tool output in the merged request is matched to its recorded original and stays reduced."""
    path = tmp_path / "messages.json"
    middleware = middleware_for(path)
    call = ToolCallPart("read_file", {"path": "big.txt"}, tool_call_id="c1")
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("read it")]),
        ModelResponse(parts=[call]),
        ModelRequest(parts=[ToolReturnPart("read_file", "x" * 5_000, tool_call_id="c1")]),
        ModelRequest(parts=[UserPromptPart("and now?")]),
    ]
    await middleware(history)
    assert middleware.store is not None and len(middleware.store) == 4

    merged = repair_messages(history)
    assert len(merged) == 3 and get_message_id(merged[-1]) is None  # what pydantic-ai does at a run's start
    result_part = merged[-1].parts[0]
    assert isinstance(result_part, ToolReturnPart)
    evicted = replace(result_part, content="preview", metadata={"pydantic_deep.eviction": {"path": "x"}})
    merged[-1] = replace(merged[-1], parts=[evicted, *merged[-1].parts[1:]])  # type: ignore[arg-type]

    restored = await middleware(merged)
    assert [get_message_id(m) for m in restored] == [get_message_id(m) for m in history]
    assert restored[2].parts == [evicted]  # the reduction is kept in the working context
    assert validate_history(restored) == []
    assert len(middleware.store) == 4  # nothing recorded again
    assert recorded(path)[2].parts[0].content == "x" * 5_000  # type: ignore[union-attr]  # the original stays


async def test_requests_merged_at_the_start_of_the_history_are_restored(tmp_path: Path) -> None:
    middleware = middleware_for(tmp_path / "messages.json")
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(f"try {i}")]) for i in range(3)]
    for message in history:
        ensure_message_id(message)
    await middleware(history)
    assert [get_message_id(m) for m in await middleware(repair_messages(history))] == [
        get_message_id(m) for m in history
    ]


async def test_a_plain_call_restores_requests_merged_after_the_part_it_has_seen(tmp_path: Path) -> None:
    """The plain form looks for merged requests among the messages it has not seen (not the whole history at
    every call): requests merged after a history it saw are still split back."""
    middleware = middleware_for(tmp_path / "messages.json")
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hello")]),
        ModelResponse(parts=[TextPart("hi")]),
    ]
    await middleware(history)
    failed = [ModelRequest(parts=[UserPromptPart(f"try {i}")]) for i in range(2)]
    for message in failed:
        ensure_message_id(message)
    assert middleware.store is not None
    await middleware.store.append(failed)  # two failed turns, recorded by their runs
    ids = [get_message_id(m) for m in [*history, *failed]]
    history += repair_messages(failed)  # the same list, grown by the merge of the two
    assert len(history) == 3 and get_message_id(history[2]) is None
    restored = await middleware(history)
    assert [get_message_id(m) for m in restored] == ids
    assert validate_history(restored) == [] and len(middleware.store) == 4  # nothing recorded twice
