"""ClampOversizedParts and the middleware's `max_part_tokens`: a single oversized part (a runaway response, giant
tool-call arguments, a huge tool return, a user prompt larger than the window) is cut to its head and tail as it
enters the history, with a marker naming the stored original; the store keeps the original, and the overflow
ladder clamps what no other step reaches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import (
    CompactionPart,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    ClampOversizedParts,
    ContextEvent,
    ContextManagerMiddleware,
    JsonHistoryStore,
    OverflowRecovered,
    PartsClamped,
    count_tokens_approximately,
    ensure_message_id,
    get_message_id,
    validate_history,
)
from summarization_pydantic_ai._tokens import estimate_text_tokens
from summarization_pydantic_ai.clamp import CLAMPED_METADATA_KEY

RUNAWAY = "All work and no play makes Jack a dull boy. " * 12_000  # about 132,000 tokens, one line
LOG = "\n".join(f"step {i}: compiled module_{i}.py in {i % 97} ms" for i in range(20_000))  # about 220,000 tokens


def texts(messages: list[ModelMessage]) -> str:
    return json.dumps(ModelMessagesTypeAdapter.dump_python(messages, mode="json"))


# --- what a clamp does to each part --------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")  # still found in recorded histories
async def test_every_kind_of_oversized_part_is_cut_in_place_and_pair_safe() -> None:
    write = {"path": "notes.md", "content": RUNAWAY, "mode": "w"}
    history: list[ModelMessage] = [
        ModelRequest(
            parts=[SystemPromptPart("sys " * 9_000), UserPromptPart(["Look:", ImageUrl("https://x/a.png"), LOG])]
        ),
        ModelResponse(
            parts=[
                ThinkingPart("hmm " * 9_000, signature="sig"),
                TextPart(RUNAWAY),
                ToolCallPart("write_file", write, "w1"),
                ToolCallPart("write_file", json.dumps(write), "w2"),
                ToolCallPart("run", "not json " * 9_000, "r1"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("write_file", "ok", "w1"),
                ToolReturnPart("write_file", LOG, "w2"),
                RetryPromptPart("bad input " * 9_000, tool_name="run", tool_call_id="r1"),
            ]
        ),
        ModelRequest(parts=[CompactionPart(content="summary " * 9_000), UserPromptPart("go on")]),
    ]
    for message in history:
        ensure_message_id(message)
    before = texts(history)
    events: list[ContextEvent] = []
    out = await ClampOversizedParts(max_part_tokens=5_000, clamp_to_tokens=500, event_callback=events.append)(history)
    assert texts(history) == before  # the input is never edited
    assert validate_history(out) == []
    assert [type(p) for m in out for p in m.parts] == [type(p) for m in history for p in m.parts]
    request, response, results, summary = out
    assert request.parts[0] is history[0].parts[0] and summary is history[3]  # system prompts and summaries stay
    prompt = request.parts[1].content
    assert prompt[0] == "Look:" and prompt[1] == ImageUrl("https://x/a.png") and len(prompt[2]) < 3_000
    thinking, text, call_dict, call_json, call_text = response.parts
    assert thinking is history[1].parts[0]  # signed by the provider: never rewritten
    assert estimate_text_tokens(text.content) <= 500 and text.content.startswith("All work")
    assert set(call_dict.args) == set(write) and call_dict.args["path"] == "notes.md"
    assert estimate_text_tokens(call_dict.args["content"]) <= 500
    assert set(json.loads(call_json.args)) == set(write)  # a JSON string stays a JSON string
    assert isinstance(call_text.args, str) and len(call_text.args) < 3_000
    assert list(json.loads(call_text.args)) == ["_clamped"]  # invalid JSON became valid arguments
    assert [c.tool_call_id for c in response.parts[2:]] == ["w1", "w2", "r1"]
    assert results.parts[0] is history[2].parts[0] and len(results.parts[1].content) < 3_000
    message_id = get_message_id(history[1])
    assert f"the original is message {message_id} in the history store" in text.content
    assert "the middle was cut" in text.content
    (event,) = events
    assert isinstance(event, PartsClamped)
    assert sorted((c.message_index, c.kind) for c in event.parts) == [
        (0, "user_prompt"),
        (1, "text"),
        (1, "tool_call_args"),
        (1, "tool_call_args"),
        (1, "tool_call_args"),
        (2, "retry_prompt"),
        (2, "tool_return"),
    ]
    assert event.tokens_before > 600_000 and event.tokens_after < 5_000
    assert {e["part"] for e in response.metadata[CLAMPED_METADATA_KEY]} == {1, 2, 3, 4}
    again = await ClampOversizedParts(max_part_tokens=5_000, clamp_to_tokens=500)(out)
    assert texts(again) == texts(out)  # clamping is idempotent


async def test_parts_below_the_limit_and_kinds_left_out_are_untouched() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(RUNAWAY)]),
        ModelResponse(parts=[TextPart(RUNAWAY)]),
    ]
    history.append(ModelRequest(parts=[UserPromptPart("short")]))
    assert await ClampOversizedParts(max_part_tokens=200_000)(history) is history
    out = await ClampOversizedParts(max_part_tokens=5_000, kinds=["text"])(history)
    assert out[0] is history[0] and out[1] is not history[1]
    assert "the original was not stored" in out[1].parts[0].content  # no store: said plainly


# --- through a run ----------------------------------------------------------------------------------------------


async def test_a_runaway_response_is_clamped_once_and_the_store_keeps_the_original(tmp_path: Path) -> None:
    sent: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(messages)
        return ModelResponse(parts=[TextPart(RUNAWAY if len(sent) == 1 else f"answer {len(sent)}")])

    store = JsonHistoryStore.open(tmp_path / "messages.json")
    middleware = ContextManagerMiddleware(history_store=store, summarization_model=None)
    clamp = ClampOversizedParts(max_part_tokens=10_000, history_store=store)
    agent = Agent(FunctionModel(model), capabilities=[clamp, middleware])
    first = await agent.run("Write something.")
    runaway = first.all_messages()[-1]
    second = await agent.run("Again.", message_history=first.all_messages())
    third = await agent.run("Once more.", message_history=second.all_messages())
    assert third.output == "answer 3"
    clamped = sent[1][1].parts[0].content
    assert count_tokens_approximately(sent[1]) < 2_000 and clamped.startswith("All work and no play")
    assert sent[2][1].parts[0].content == clamped  # the prefix sent later is the same: cut once, when it entered
    message_id = get_message_id(runaway)
    assert message_id is not None and message_id in clamped
    (original,) = (await store.read(message_id, message_id)).messages
    assert original.parts[0].content == RUNAWAY  # lossless: the store returns the original
    recorded = ModelMessagesTypeAdapter.validate_json((tmp_path / "messages.json").read_bytes())
    assert [get_message_id(m) for m in recorded].count(message_id) == 1  # no clamped "new version"
    assert validate_history(third.all_messages(), for_request=False) == []


async def test_giant_tool_call_arguments_are_clamped_after_the_tool_ran() -> None:
    sent: list[list[ModelMessage]] = []
    written: list[int] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(messages)
        if len(sent) == 1:
            return ModelResponse(parts=[ToolCallPart("write_file", {"path": "big.txt", "content": LOG}, "w1")])
        return ModelResponse(parts=[TextPart("written")])

    agent = Agent(FunctionModel(model), capabilities=[ClampOversizedParts(max_part_tokens=8_000)])

    @agent.tool_plain
    def write_file(path: str, content: str) -> str:
        written.append(len(content))
        return f"wrote {len(content)} characters to {path}"

    result = await agent.run("Save the log.")
    assert written == [len(LOG)]  # the tool got every character
    call = sent[1][1].parts[0]
    assert isinstance(call, ToolCallPart) and call.args["path"] == "big.txt"
    assert estimate_text_tokens(call.args["content"]) <= 800 and call.tool_call_id == "w1"
    assert validate_history(result.all_messages(), for_request=False) == []


async def test_a_user_prompt_larger_than_the_window_is_clamped_before_it_is_sent() -> None:
    sent: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(messages)
        return ModelResponse(parts=[TextPart("read it")])

    clamp = ClampOversizedParts(max_part_tokens=("fraction", 0.5), max_tokens=100_000)
    await Agent(FunctionModel(model), capabilities=[clamp]).run(LOG)
    prompt = sent[0][0].parts[0].content
    assert prompt.startswith("step 0: compiled") and prompt.rstrip().endswith("in 17 ms")  # head and tail
    assert 4_000 <= estimate_text_tokens(prompt) <= 5_000  # a tenth of the 50,000-token limit


async def test_the_middleware_option_records_first_and_points_at_read_history(tmp_path: Path) -> None:
    sent: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(messages)
        last = messages[-1].parts[-1]
        if len(sent) == 1:
            return ModelResponse(parts=[TextPart(LOG)])
        if isinstance(last, ToolReturnPart):
            return ModelResponse(
                parts=[TextPart("found: " + ("step 19999" if "step 19999" in str(last.content) else "no"))]
            )
        marker = str(messages[1].parts[0].content)
        start = marker.split('read_history(start_id="')[1].split('"', maxsplit=1)[0]
        return ModelResponse(parts=[ToolCallPart("read_history", {"start_id": start, "end_id": start})])

    middleware = ContextManagerMiddleware(
        messages_path=tmp_path / "messages.json",
        summarization_model=None,
        max_part_tokens=20_000,
        expose_history_tool=True,
        max_tokens=1_000_000,
    )
    agent = Agent(FunctionModel(model), capabilities=[middleware])
    first = await agent.run("Build everything.")
    second = await agent.run("What was the last step?", message_history=first.all_messages())
    assert second.output == "found: step 19999"
    assert estimate_text_tokens(str(sent[1][1].parts[0].content)) <= 2_000
    store = middleware.store
    assert store is not None
    runaway_id = get_message_id(first.all_messages()[1])
    (original,) = (await store.read(runaway_id, runaway_id)).messages
    assert original.parts[0].content == LOG
    assert CLAMPED_METADATA_KEY not in (original.metadata or {})


# --- the overflow ladder ------------------------------------------------------------------------------------------

WINDOW = 30_000


def small_provider(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    tokens = count_tokens_approximately(messages)
    if tokens > WINDOW:
        raise ModelContextWindowExceededError("small", f"prompt is too long: {tokens} tokens > {WINDOW} maximum")
    return ModelResponse(parts=[TextPart("done")])


async def test_the_overflow_ladder_clamps_a_huge_in_flight_call() -> None:
    """The in-flight exchange is a call with 220,000 tokens of arguments: no step before could reach it."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Save the build log.")]),
        ModelResponse(parts=[ToolCallPart("write_file", {"path": "build.log", "content": LOG}, "w1")]),
        ModelRequest(parts=[ToolReturnPart("write_file", "saved", "w1")]),
    ]
    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(summarization_model=None, event_callback=events.append)
    result = await Agent(FunctionModel(small_provider), capabilities=[middleware]).run(message_history=history)
    assert result.output == "done"
    (recovered,) = [e for e in events if isinstance(e, OverflowRecovered)]
    assert recovered.steps == ("clamp_oversized_parts",)
    assert validate_history(result.all_messages(), for_request=False) == []
    call = result.all_messages()[1].parts[0]
    assert isinstance(call, ToolCallPart) and call.args["path"] == "build.log" and call.tool_call_id == "w1"


async def test_a_prompt_larger_than_the_window_is_clamped_last() -> None:
    """Summarizing and sliding carry the latest request verbatim: when it alone is over, its text is clamped last."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("an older question")]),
        ModelResponse(parts=[TextPart("an answer")]),
    ]
    events: list[ContextEvent] = []
    # The window is not known (1,000,000 assumed): no compaction before the provider's rejection.
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=1_000_000, event_callback=events.append)
    result = await Agent(FunctionModel(small_provider), capabilities=[middleware]).run(LOG, message_history=history)
    assert result.output == "done"
    (recovered,) = [e for e in events if isinstance(e, OverflowRecovered)]
    assert recovered.steps[-1] == "clamp_latest_request"
    prompt = [p for m in result.all_messages() for p in m.parts if isinstance(p, UserPromptPart)][-1]
    assert prompt.content.startswith("step 0: compiled") and "the middle was cut" in prompt.content
    assert validate_history(result.all_messages(), for_request=False) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_part_tokens": None}, ValueError, "max_part_tokens is required"),
        ({"max_part_tokens": 10}, ValueError, "max_part_tokens must be more than 64"),
        ({"max_part_tokens": ("messages", 3)}, ValueError, "a part's limit is in tokens"),
        ({"max_part_tokens": ("fraction", 2.0)}, ValueError, r"a fraction must be in \(0, 1\]"),
        ({"max_part_tokens": "50k"}, TypeError, "max_part_tokens must be a ContextSize"),
        ({"max_part_tokens": 1_000, "clamp_to_tokens": 1_000}, ValueError, "must be smaller than max_part_tokens"),
        ({"clamp_to_tokens": 10}, ValueError, "clamp_to_tokens must be at least 64"),
        ({"clamp_to_tokens": 1.5}, TypeError, "clamp_to_tokens must be an int"),
        ({"kinds": "text"}, TypeError, "kinds must be a sequence"),
        ({"kinds": ["text", "thinking"]}, ValueError, r"kinds: \['thinking'\]"),
        ({"history_store": "messages.json"}, TypeError, "history_store must be a HistoryStore"),
    ],
)
def test_settings_are_validated(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ClampOversizedParts(**kwargs)


def test_the_middleware_validates_its_clamp_settings() -> None:
    with pytest.raises(ValueError, match="max_part_tokens must be more than 64"):
        ContextManagerMiddleware(max_part_tokens=5)
    with pytest.raises(ValueError, match="clamp_to_tokens"):
        ContextManagerMiddleware(max_part_tokens=1_000, clamp_to_tokens=2_000)
