"""Message utilities: the tool-pair index, history validation, summary recognition and rendering."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai.messages import (
    BinaryContent,
    CompactionPart,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from summarization_pydantic_ai import (
    MESSAGE_ID_KEY,
    SUMMARY_METADATA_KEY,
    HistoryProblem,
    ToolPairIndex,
    get_message_id,
    is_summary_message,
    render_message,
    render_messages,
    summary_info,
    summary_part,
    validate_history,
)


def req(*parts: ModelRequestPart, **kwargs: Any) -> ModelRequest:
    return ModelRequest(parts=list(parts), **kwargs)


def resp(*parts: ModelResponsePart, **kwargs: Any) -> ModelResponse:
    return ModelResponse(parts=list(parts), **kwargs)


def user(text: str = "hi") -> UserPromptPart:
    return UserPromptPart(text)


def call(call_id: str, name: str = "grep", args: Any = None) -> ToolCallPart:
    return ToolCallPart(name, args if args is not None else {"pattern": "x"}, call_id)


def ret(call_id: str, name: str = "grep", content: Any = "found", outcome: Any = "success") -> ToolReturnPart:
    return ToolReturnPart(name, content, call_id, outcome=outcome)


def summary(text: str = "earlier: the user asked for X") -> ModelRequest:
    return req(CompactionPart(content=text))


def kinds(messages: list[ModelMessage], *, for_request: bool = True) -> list[tuple[str, int]]:
    return [(p.kind, p.message_index) for p in validate_history(messages, for_request=for_request)]


# --- a valid finished run -------------------------------------------------------------------------------------


def finished_run() -> list[ModelMessage]:
    """What a real run writes: parallel calls, a retry called again, thinking, a native tool, a final answer."""
    return [
        req(SystemPromptPart("be careful"), user("fix the bug")),
        resp(ThinkingPart("look first"), call("a", "read_file"), call("b", "grep")),
        req(ret("b", "grep"), ret("a", "read_file", {"lines": 3})),  # parallel results, any order
        resp(call("c", "run_tests")),
        req(ret("c", "run_tests", "bad args", outcome="retried")),
        resp(call("d", "run_tests")),
        req(ret("d", "run_tests", ["1 failed"], outcome="failed")),
        resp(
            NativeToolCallPart("web_search", {"query": "q"}, "ws1", provider_name="openai"),
            NativeToolReturnPart("web_search", "results", "ws1", provider_name="openai"),
            call("e", "write_file"),
        ),
        req(ret("e", "write_file", "user said no", outcome="denied"), user("also update the docs")),
        resp(TextPart("done")),
    ]


def test_a_finished_run_is_valid_without_for_request() -> None:
    messages = finished_run()
    assert validate_history(messages, for_request=False) == []
    # about to be sent, the same history would end with the model's own answer
    assert kinds(messages) == [("ends_with_response", 9)]


def test_a_history_about_to_be_sent_is_valid() -> None:
    messages = [*finished_run(), req(user("next question"))]
    assert validate_history(messages) == []
    pending = [*finished_run()[:-1]]  # ends with pending tool results
    assert validate_history(pending) == []


# --- every problem kind ---------------------------------------------------------------------------------------


def test_orphan_call() -> None:
    messages = [req(user()), resp(call("c1")), req(user("never answered"))]
    problems = validate_history(messages)
    assert [(p.kind, p.message_index, p.tool_call_id) for p in problems] == [("orphan_call", 1, "c1")]


def test_orphan_call_only_for_the_unanswered_call_of_parallel_calls() -> None:
    messages = [req(user()), resp(call("c1"), call("c2"), call("c3")), req(ret("c1"), ret("c3"))]
    problems = validate_history(messages)
    assert [(p.kind, p.tool_call_id) for p in problems] == [("orphan_call", "c2")]


def test_calls_in_the_last_response_are_checked_only_for_a_request() -> None:
    messages = [req(user()), resp(call("c1"))]
    assert kinds(messages, for_request=True) == [("orphan_call", 1), ("ends_with_response", 1)]
    # a finished run may end with calls it deferred (e.g. tools needing approval)
    assert kinds(messages, for_request=False) == []


def test_orphan_return() -> None:
    messages = [req(user()), resp(TextPart("hello")), req(ret("c9"))]
    problems = validate_history(messages)
    assert [(p.kind, p.message_index, p.tool_call_id) for p in problems] == [("orphan_return", 2, "c9")]


def test_a_result_must_follow_its_own_response() -> None:
    """A result for a call of an older response (another response in between) is an orphan too."""
    messages = [req(user()), resp(call("c1")), req(ret("c1")), resp(TextPart("ok")), req(ret("c1"))]
    assert kinds(messages) == [("orphan_return", 4)]


def test_orphan_return_when_its_call_was_cut() -> None:
    messages = [summary(), req(ret("c1")), resp(TextPart("ok")), req(user())]
    assert ("orphan_return", 1) in kinds(messages)


def test_duplicate_return() -> None:
    messages = [req(user()), resp(call("c1")), req(ret("c1"), ret("c1"))]
    problems = validate_history(messages)
    assert [(p.kind, p.message_index, p.tool_call_id) for p in problems] == [("duplicate_return", 2, "c1")]


def test_duplicate_return_across_requests_of_one_run() -> None:
    messages = [req(user()), resp(call("c1")), req(ret("c1", outcome="retried")), req(ret("c1"))]
    assert kinds(messages) == [("duplicate_return", 3)]


def test_ends_with_response_only_with_for_request() -> None:
    messages = [req(user()), resp(TextPart("answer"))]
    assert kinds(messages, for_request=True) == [("ends_with_response", 1)]
    assert kinds(messages, for_request=False) == []


def test_empty_request() -> None:
    messages = [req(user()), resp(TextPart("a")), req()]
    assert kinds(messages) == [("empty_request", 2)]


def test_assistant_first() -> None:
    messages = [req(SystemPromptPart("sys")), resp(TextPart("I speak first")), req(user())]
    assert kinds(messages) == [("assistant_first", 1)]
    assert kinds([resp(TextPart("x")), req(user())]) == [("assistant_first", 0)]


def test_a_summary_opens_the_conversation_for_the_assistant() -> None:
    messages = [req(SystemPromptPart("sys")), summary(), resp(call("c1")), req(ret("c1"))]
    assert validate_history(messages) == []


def test_summary_only() -> None:
    messages = [req(SystemPromptPart("sys")), summary()]
    assert kinds(messages) == [("summary_only", 0)]
    assert kinds([summary()]) == [("summary_only", 0)]


def test_empty_history() -> None:
    assert kinds([]) == [("empty_history", 0)]
    assert kinds([], for_request=False) == []


def test_problems_come_in_message_order_and_read_well() -> None:
    messages = [resp(TextPart("x")), req(), req(ret("zz")), resp(call("c1"))]
    problems = validate_history(messages)
    assert [p.message_index for p in problems] == sorted(p.message_index for p in problems)
    assert {p.kind for p in problems} == {
        "assistant_first",
        "empty_request",
        "orphan_return",
        "orphan_call",
        "ends_with_response",
    }
    first = HistoryProblem("orphan_call", 3, "a tool call with no result after it", "c1")
    assert str(first) == "orphan_call at message 3: a tool call with no result after it"


# --- the tool-pair index --------------------------------------------------------------------------------------


def test_index_maps_parallel_calls_to_their_response_and_results() -> None:
    index = ToolPairIndex.build(finished_run())
    assert index.calls["a"] == index.calls["b"] == 1
    assert index.results["a"] == index.results["b"] == [2]
    assert index.earliest_call_for_message[2] == 1
    assert index.earliest_call_for_message[0] == 0  # no results: its own index
    assert index.earliest_call_for_message[1] == 1
    assert index.pending_call_ids() == []


def test_index_maps_retries_and_every_outcome() -> None:
    index = ToolPairIndex.build(finished_run())
    assert index.calls["c"] == 3 and index.results["c"] == [4]  # retried
    assert index.calls["d"] == 5 and index.results["d"] == [6]  # the new call after the retry
    assert index.results["e"] == [8]  # denied
    assert index.earliest_call_for_message[8] == 7


def test_index_keeps_native_parts_apart() -> None:
    index = ToolPairIndex.build(finished_run())
    assert index.native_calls == {"ws1": 7}
    assert index.native_results == {"ws1": [7]}
    assert "ws1" not in index.calls and "ws1" not in index.results


def test_index_multiple_results_and_pending_calls() -> None:
    messages = [
        req(user()),
        resp(call("c1"), call("c2")),
        req(ret("c1", outcome="interrupted")),
        req(ret("c1")),
    ]
    index = ToolPairIndex.build(messages)
    assert index.results["c1"] == [2, 3]
    assert index.pending_call_ids() == ["c2"]
    assert index.earliest_call_for_message == [0, 1, 1, 1]


def test_index_of_a_result_without_its_call() -> None:
    index = ToolPairIndex.build([summary(), req(ret("gone"))])
    assert index.results == {"gone": [1]}
    assert index.earliest_call_for_message == [0, 1]


# --- summaries and ids ----------------------------------------------------------------------------------------


def test_summary_recognition() -> None:
    ours = req(CompactionPart(content="s", metadata={SUMMARY_METADATA_KEY: {"covers": ["m1"]}}))
    foreign = summary("another library's summary")
    provider = resp(CompactionPart(content="opaque", provider_name="openai"))
    assert is_summary_message(ours) and summary_info(ours) == {"covers": ["m1"]}
    assert is_summary_message(foreign) and summary_info(foreign) is None
    assert not is_summary_message(provider)  # a provider's compaction is not ours to replace
    assert render_message(provider) == "Provider summary: opaque"
    assert summary_part(resp(TextPart("x"))) is None
    assert not is_summary_message(req(user()))


def test_message_ids() -> None:
    assert get_message_id(req(user(), metadata={MESSAGE_ID_KEY: "m-1"})) == "m-1"
    assert get_message_id(req(user())) is None
    assert get_message_id(req(user(), metadata={MESSAGE_ID_KEY: 7})) is None


# --- rendering ------------------------------------------------------------------------------------------------


def test_render_multimodal_user_prompt() -> None:
    message = req(
        UserPromptPart(
            [
                "compare these",
                ImageUrl(url="https://example.com/cat.png"),
                BinaryContent(data=b"\x89PNG1234", media_type="image/png"),
                DocumentUrl(url="https://example.com/spec.pdf"),
            ]
        )
    )
    text = render_message(message)
    assert text.startswith("User: compare these")
    assert "[image: https://example.com/cat.png]" in text
    assert "[binary image/png, 8 bytes]" in text
    assert "[document: https://example.com/spec.pdf]" in text


def test_render_thinking_tool_args_and_returns() -> None:
    response = resp(
        ThinkingPart("I should grep first"),
        TextPart("Let me look."),
        ToolCallPart("grep", {"pattern": "def main"}, "c1"),
        ToolCallPart("read_file", '{"path": "a.py"}', "c2"),
    )
    text = render_message(response)
    assert "Thinking: I should grep first" in text
    assert "Assistant: Let me look." in text
    assert 'Tool call grep [c1]: {"pattern":"def main"}' in text
    assert 'Tool call read_file [c2]: {"path": "a.py"}' in text  # string args as they are

    results = req(
        ToolReturnPart("grep", {"matches": ["a.py:1"], "count": 1}, "c1"),
        ToolReturnPart("read_file", ["line 1", "line 2"], "c2", outcome="failed"),
        ToolReturnPart("run", "bad args", "c3", outcome="retried"),
    )
    text = render_message(results)
    assert 'Tool result grep [c1]: {"matches":["a.py:1"],"count":1}' in text
    assert "Tool result read_file [c2] (failed): line 1\nline 2" in text
    assert "Tool result run [c3] (retried): bad args" in text


def test_render_system_summary_native_and_headers() -> None:
    message = req(SystemPromptPart("be brief"), user("go"), metadata={MESSAGE_ID_KEY: "m-7"})
    assert render_message(message, index=3) == "--- message 3 (id m-7) ---\nSystem: be brief\nUser: go"
    assert render_message(summary("so far")) == "Summary: so far"
    native = resp(
        NativeToolCallPart("web_search", {"query": "pydantic"}, "ws1", provider_name="openai"),
        NativeToolReturnPart("web_search", {"hits": 3}, "ws1", provider_name="openai"),
    )
    text = render_message(native)
    assert 'Tool call web_search [ws1]: {"query":"pydantic"}' in text
    assert 'Tool result web_search [ws1]: {"hits":3}' in text
    both = render_messages([message, summary("so far")], start_index=5)
    assert "--- message 5 (id m-7) ---" in both and "--- message 6 ---\nSummary: so far" in both


def test_render_elides_long_parts_in_the_middle() -> None:
    long = "a" * 500 + "MIDDLE" + "z" * 500
    text = render_message(req(user(long)), max_part_chars=200)
    assert "MIDDLE" not in text and "characters elided" in text
    assert "aaaa" in text and "zzzz" in text


@pytest.mark.parametrize("messages", [finished_run()])
def test_render_every_message_of_a_run(messages: list[ModelMessage]) -> None:
    for message in messages:
        assert render_message(message).strip()
