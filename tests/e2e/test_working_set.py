"""The guaranteed working set, end to end: after every compaction path the latest user request, the pinned
messages (by id and by predicate) and the current todo list reach the model verbatim, in the documented order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    MESSAGE_ID_KEY,
    CompactionCompleted,
    ContextEvent,
    ContextManagerMiddleware,
    SlidingWindowProcessor,
    SummarizationProcessor,
    WindowTrimmed,
    get_message_id,
    is_summary_message,
    validate_history,
)

LATEST = "LATEST: read every data file, then report the total."
PINNED = UserPromptPart("CONSTRAINT: answer in French, and never touch the tests/ directory.")
BY_PREDICATE = UserPromptPart("NOTE-TO-KEEP: the staging database is read-only.")
TODO_CALL = ToolCallPart("write_todos", {"todos": [{"content": "read the files", "status": "in_progress"}]}, "t1")
TODO_RESULT = ToolReturnPart("write_todos", "1. [in_progress] read the files", "t1")


def keep_note(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and any("NOTE-TO-KEEP" in str(p.content) for p in message.parts)


def old_history() -> list[ModelMessage]:
    """An earlier conversation: a pinned constraint, a plan written with `write_todos`, a note, filler turns."""

    def request(*parts: Any, mid: str) -> ModelRequest:
        return ModelRequest(parts=list(parts), metadata={MESSAGE_ID_KEY: mid})

    def response(*parts: Any, mid: str) -> ModelResponse:
        return ModelResponse(parts=list(parts), metadata={MESSAGE_ID_KEY: mid})

    history: list[ModelMessage] = [
        request(SystemPromptPart("You are a careful data assistant."), PINNED, mid="m-pinned"),
        response(TextPart("D'accord."), mid="m-1"),
        request(UserPromptPart("Plan the work first."), mid="m-2"),
        response(TODO_CALL, mid="m-3"),
        request(TODO_RESULT, mid="m-4"),
        response(TextPart("Planned."), mid="m-5"),
        request(BY_PREDICATE, mid="m-note"),
        response(TextPart("Noted."), mid="m-6"),
    ]
    for i in range(4):
        history.append(request(UserPromptPart(f"filler question {i} " + "words " * 200), mid=f"m-f{i}"))
        history.append(response(TextPart(f"filler answer {i} " + "words " * 200), mid=f"m-a{i}"))
    return history


@dataclass
class ReadLoop:
    """Calls `read` `calls` times after the prompt (large outputs), then answers; records what it was sent."""

    calls: int
    prefix: str = "r"
    seen: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    made: int = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        if self.made < self.calls:
            self.made += 1
            call = ToolCallPart("read", {"n": self.made}, tool_call_id=f"{self.prefix}{self.made}")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("done")])


def make_agent(model: Any, capability: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[capability])

    @agent.tool_plain
    def read(n: int) -> str:
        return f"file {n}\n" + "value = 1\n" * 300

    @agent.tool_plain
    def write_todos(todos: list[dict[str, str]]) -> str:
        return "ok"

    return agent


def positions(messages: list[ModelMessage]) -> dict[str, tuple[int, int]]:
    """Where (message, part) each item of the working set is in a request the model received."""
    found: dict[str, tuple[int, int]] = {}
    for i, message in enumerate(messages):
        for j, part in enumerate(message.parts):
            if isinstance(part, CompactionPart):
                found.setdefault("summary", (i, j))
            elif part == PINNED:
                found["pinned"] = (i, j)
            elif part == BY_PREDICATE:
                found["by_predicate"] = (i, j)
            elif part == TODO_CALL:
                found["todo_call"] = (i, j)
            elif part == TODO_RESULT:
                found["todo_result"] = (i, j)
            elif isinstance(part, UserPromptPart) and part.content == LATEST:
                found["latest"] = (i, j)
    return found


def assert_working_set(seen: list[list[ModelMessage]], *, predicate: bool = True) -> None:
    """Every request after a compaction holds the working set verbatim, in order, and validates."""
    compacted = [messages for messages in seen if any(is_summary_message(m) for m in messages)]
    assert compacted, "the scenario must compact"
    for messages in compacted:
        assert validate_history(messages) == []
        at = positions(messages)
        assert {"summary", "pinned", "todo_call", "todo_result", "latest"} <= at.keys(), at
        # summary, then the pinned requests (in history order), the latest request, the todo list
        assert at["summary"] < at["pinned"] < at.get("by_predicate", at["latest"]) <= at["latest"]
        assert not predicate or "by_predicate" in at
        assert at["summary"] < at["todo_call"] < at["todo_result"]
        assert at["todo_result"][0] == at["todo_call"][0] + 1  # the call and its result stay paired
        assert sum(isinstance(p, SystemPromptPart) for m in messages for p in m.parts) == 1


def events_of(kind: type, events: list[ContextEvent]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def assert_reported(event: CompactionCompleted | WindowTrimmed) -> None:
    kinds = {item.kind: item for item in event.preserved}
    assert {"latest_request", "pinned", "todo"} <= kinds.keys()
    pinned_ids = {mid for item in event.preserved if item.kind == "pinned" for mid in item.message_ids}
    assert {"m-pinned", "m-note"} <= pinned_ids
    assert kinds["todo"].message_ids == ("m-3", "m-4")


async def test_automatic_compaction_keeps_the_working_set() -> None:
    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(
        summarization_model=None, max_tokens=8_000, pin_predicate=keep_note, event_callback=events.append
    )
    middleware.pin("m-pinned")
    model = ReadLoop(calls=8)
    result = await make_agent(model, middleware).run(LATEST, message_history=old_history())
    assert result.output == "done" and middleware.compression_count >= 1
    assert_working_set(model.seen)
    assert validate_history(result.all_messages(), for_request=False) == []
    for event in events_of(CompactionCompleted, events):
        assert_reported(event)


async def test_request_compact_keeps_the_working_set() -> None:
    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(
        summarization_model=None, max_tokens=1_000_000, pin_predicate=keep_note, event_callback=events.append
    )
    middleware.pin("m-pinned")
    middleware.request_compact()
    model = ReadLoop(calls=1)
    await make_agent(model, middleware).run(LATEST, message_history=old_history())
    assert middleware.compression_count == 1
    assert_working_set(model.seen)
    (event,) = events_of(CompactionCompleted, events)
    assert_reported(event)


async def test_compact_keeps_the_working_set_for_the_next_run() -> None:
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=1_000_000, pin_predicate=keep_note)
    middleware.pin("m-pinned")
    first = ReadLoop(calls=3)
    history = (await make_agent(first, middleware).run(LATEST, message_history=old_history())).all_messages()
    in_flight = history[:-1]  # ends with the last tool result: the loop is still running
    compacted = await middleware.compact(in_flight)
    assert any(is_summary_message(m) for m in compacted)
    model = ReadLoop(calls=4)  # one more read, then the answer
    result = await make_agent(model, middleware).run(message_history=compacted)
    assert result.output == "done"
    assert_working_set(model.seen)


@pytest.mark.parametrize(
    "make",
    [
        lambda: SummarizationProcessor(None, trigger=("messages", 20), keep=0, pin_predicate=keep_note),
        lambda: SlidingWindowProcessor(trigger=("messages", 20), keep=0, pin_predicate=keep_note),
    ],
    ids=["summarization", "sliding-window"],
)
async def test_processors_keep_the_working_set(make: Any) -> None:
    events: list[ContextEvent] = []
    processor = make()
    processor.event_callback = events.append
    processor.pin("m-pinned")
    model = ReadLoop(calls=8)
    result = await make_agent(model, processor).run(LATEST, message_history=old_history())
    assert result.output == "done"
    assert_working_set(model.seen)
    reported = events_of(CompactionCompleted, events) + events_of(WindowTrimmed, events)
    assert reported
    for event in reported:
        assert_reported(event)


async def test_a_pin_survives_repeated_compactions_and_runs() -> None:
    """A pinned request joins the summary's request; the summary records it, so the pin holds at the next
    compaction and in the next run (where pydantic-ai merges requests and message ids would be lost)."""
    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=6_000, event_callback=events.append)
    middleware.pin("m-pinned")
    model = ReadLoop(calls=10)
    history = (await make_agent(model, middleware).run(LATEST, message_history=old_history())).all_messages()
    second = ReadLoop(calls=16, prefix="s")
    await make_agent(second, middleware).run("go on reading", message_history=history)
    assert len(events_of(CompactionCompleted, events)) >= 3
    for event in events_of(CompactionCompleted, events):
        assert "m-pinned" in {mid for item in event.preserved if item.kind == "pinned" for mid in item.message_ids}
    for seen in [*model.seen, *second.seen]:
        assert any(p == PINNED for m in seen for p in m.parts)


async def test_over_budget_the_lowest_priorities_go_first_and_the_latest_request_stays() -> None:
    events: list[ContextEvent] = []
    big_pin = UserPromptPart("PINNED-BIG " + "detail " * 400)
    history = old_history()
    history[10] = ModelRequest(parts=[big_pin], metadata={MESSAGE_ID_KEY: "m-big"})
    processor = SummarizationProcessor(
        None, trigger=("messages", 1_000), keep=0, working_set_tokens=300, event_callback=events.append
    )
    processor.pin("m-pinned")
    processor.pin("m-big")
    out = await processor.compact([*history, ModelRequest(parts=[UserPromptPart(LATEST)])])
    (event,) = events_of(CompactionCompleted, events)
    kept = {(item.kind, item.message_ids) for item in event.preserved}
    dropped = {(item.kind, item.message_ids) for item in event.preserved_dropped}
    assert ("pinned", ("m-pinned",)) in kept and ("todo", ("m-3", "m-4")) in kept
    assert ("pinned", ("m-big",)) in dropped  # larger than what the budget had left
    assert not any(p == big_pin for m in out for p in m.parts)
    assert any(p == PINNED for m in out for p in m.parts) and any(p == TODO_CALL for m in out for p in m.parts)
    latest = out[-1].parts[-1]
    assert isinstance(latest, UserPromptPart) and latest.content == LATEST
    assert validate_history(out) == []

    events.clear()
    none = SummarizationProcessor(None, trigger=("messages", 1_000), keep=0, working_set_tokens=0)
    none.event_callback = events.append
    none.pin("m-pinned")
    out = await none.compact([*history, ModelRequest(parts=[UserPromptPart(LATEST)])])
    (event,) = events_of(CompactionCompleted, events)
    assert [item.kind for item in event.preserved] == ["latest_request"]
    assert {item.kind for item in event.preserved_dropped} == {"pinned", "todo"}
    assert not any(p == PINNED for m in out for p in m.parts)


async def test_the_carried_latest_request_stays_after_pinned_requests_across_compactions() -> None:
    processor = SummarizationProcessor(None, trigger=("messages", 1_000), keep=0)
    processor.pin("m-pinned")
    history = [*old_history(), ModelRequest(parts=[UserPromptPart(LATEST)], metadata={MESSAGE_ID_KEY: "m-latest"})]
    history += [
        ModelResponse(parts=[ToolCallPart("read", {"n": 1}, "r1")]),
        ModelRequest(parts=[ToolReturnPart("read", "x", "r1")]),
    ]
    once = await processor.compact(history)
    twice = await processor.compact(
        [
            *once,
            ModelResponse(parts=[ToolCallPart("read", {"n": 2}, "r2")]),
            ModelRequest(parts=[ToolReturnPart("read", "y", "r2")]),
        ]
    )
    for out in (once, twice):
        assert validate_history(out) == []
        summary = next(m for m in out if is_summary_message(m))
        prompts = [p for p in summary.parts if isinstance(p, UserPromptPart)]
        assert prompts == [PINNED, UserPromptPart(LATEST, timestamp=prompts[-1].timestamp)]


async def test_pin_errors_and_unpin(tmp_path: Path) -> None:
    middleware = ContextManagerMiddleware(summarization_model=None, messages_path=tmp_path / "messages.json")
    result = await Agent(
        FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("hi")])), capabilities=[middleware]
    ).run("hello")
    first = get_message_id(result.all_messages()[0])
    assert first is not None
    middleware.pin(first)
    assert middleware.pinned == {first}
    with pytest.raises(ValueError, match="no message with id 'nope'"):
        middleware.pin("nope")
    with pytest.raises(ValueError, match="non-empty string"):
        middleware.pin("")
    middleware.unpin(first)
    middleware.unpin(first)  # unpinning twice does nothing
    assert middleware.pinned == frozenset()

    processor = SummarizationProcessor(None)
    processor.pin("not-yet-recorded")  # no store to check against: accepted, preserves nothing until it exists
    assert processor.pinned == {"not-yet-recorded"}
    with pytest.raises(ValueError, match="keep_errors"):
        SummarizationProcessor(None, keep_errors=-1)
    with pytest.raises(TypeError, match="todo_tool_names"):
        SlidingWindowProcessor(todo_tool_names="write_todos")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="working_set_tokens"):
        ContextManagerMiddleware(working_set_tokens=-5)


async def test_a_pin_added_during_a_run_applies_at_its_next_compaction() -> None:
    """The per-run copy of the middleware shares the instance's pins: a tool that pins a message mid-run works."""
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=8_000)
    reads = ReadLoop(calls=8)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(
            isinstance(p, ToolReturnPart) and p.tool_name == "pin_constraint" for m in messages for p in m.parts
        ):
            return ModelResponse(parts=[ToolCallPart("pin_constraint", {}, "p1")])
        return reads(messages, info)

    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[middleware])

    @agent.tool_plain
    def pin_constraint() -> str:
        middleware.pin("m-pinned")
        return "pinned"

    @agent.tool_plain
    def read(n: int) -> str:
        return f"file {n}\n" + "value = 1\n" * 300

    assert middleware.pinned == frozenset()
    await agent.run(LATEST, message_history=old_history())
    assert middleware.pinned == {"m-pinned"} and middleware.compression_count >= 1
    assert_working_set(reads.seen, predicate=False)


async def test_overflow_retry_keeps_the_working_set() -> None:
    """A request the provider rejects as too long is compacted (through the same compression) and retried."""
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=1_000_000, pin_predicate=keep_note)
    middleware.pin("m-pinned")
    reads = ReadLoop(calls=6)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > 14:
            raise ModelHTTPError.for_category(
                ModelContextWindowExceededError, status_code=400, model_name="test", body="prompt is too long"
            )
        return reads(messages, info)

    result = await make_agent(model, middleware).run(LATEST, message_history=old_history())
    assert result.output == "done" and middleware.compression_count >= 1
    assert_working_set(reads.seen)


async def test_the_history_file_resumes_with_the_working_set(tmp_path: Path) -> None:
    """`store.load()` returns the compacted working context, working set included, in the same order."""
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=1_000_000, messages_path=path)
    first = ReadLoop(calls=3)
    history = (await make_agent(first, middleware).run(LATEST, message_history=old_history())).all_messages()
    middleware.pin("m-pinned")
    compacted = await middleware.compact([*history, ModelRequest(parts=[UserPromptPart("and now?")])])
    store = middleware.store
    assert store is not None
    loaded = await store.load()
    assert [get_message_id(m) for m in loaded] == [get_message_id(m) for m in compacted]
    assert [m.parts for m in loaded] == [m.parts for m in compacted]
    at = positions(loaded)
    assert at["summary"] < at["pinned"] < at["todo_call"] < at["todo_result"]
