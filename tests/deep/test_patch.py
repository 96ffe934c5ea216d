"""`PatchToolCalls`: one unit test per rule, the agent forms, and a property test over damaged histories.

The property test takes valid histories from `tests/strategies.py`, damages them (results dropped, moved later or
earlier, duplicated, orphaned; the tail dropped; parts reordered; the first message cut off) and checks that the
output validates, every call has exactly one result, no real result is lost, and no real result is replaced by
a synthetic one.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from example_counts import examples, in_two_tiers
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    SYNTHESIZED_TOOL_RETURN_METADATA_KEY,
    CompactionPart,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    repair_messages,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from strategies import damaged_histories, histories

from pydantic_deep.patch import INTERRUPTED_RESULT_CONTENT, PATCH_METADATA_KEY, PLACEHOLDER_PROMPT, PatchToolCalls
from summarization_pydantic_ai import validate_history

patch = PatchToolCalls()


# --- helpers --------------------------------------------------------------------------------------------------


def user(text: str = "hi") -> UserPromptPart:
    return UserPromptPart(text)


def call(call_id: str, tool: str = "read_file") -> ToolCallPart:
    return ToolCallPart(tool, {"path": "a.py"}, call_id)


def ret(call_id: str, content: Any = "result", tool: str = "read_file", **kwargs: Any) -> ToolReturnPart:
    return ToolReturnPart(tool, content, call_id, **kwargs)


def req(*parts: ModelRequestPart) -> ModelRequest:
    return ModelRequest(parts=list(parts))


def resp(*parts: Any) -> ModelResponse:
    return ModelResponse(parts=list(parts))


def results(messages: Sequence[ModelMessage]) -> list[ToolReturnPart | RetryPromptPart]:  # pyright: ignore[reportDeprecated]
    return [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) or (isinstance(p, RetryPromptPart) and p.tool_name is not None)  # pyright: ignore[reportDeprecated]
    ]


def is_synthetic(part: object) -> bool:
    metadata = getattr(part, "metadata", None)
    return isinstance(metadata, dict) and bool(
        metadata.get(SYNTHESIZED_TOOL_RETURN_METADATA_KEY) or (metadata.get(PATCH_METADATA_KEY) or {}).get("synthetic")
    )


def notes(messages: Sequence[ModelMessage]) -> list[str]:
    """The text of every user prompt (orphan notes and placeholders included)."""
    return [
        p.content if isinstance(p.content, str) else " ".join(str(c) for c in p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


def check_valid(out: list[ModelMessage]) -> None:
    problems = validate_history(out, for_request=bool(out) and isinstance(out[-1], ModelRequest))
    assert problems == [], [str(p) for p in problems]
    for k, m in enumerate(out):
        assert not (isinstance(m, ModelRequest) and not m.parts), f"empty request at {k}"
        if k and isinstance(m, ModelResponse):
            assert not isinstance(out[k - 1], ModelResponse), f"adjacent responses at {k}"


def fingerprint(messages: Sequence[ModelMessage]) -> list[tuple[int, ...]]:
    """Identities of every message, parts list, part and content: catches in-place edits of the input."""
    return [
        (
            id(m),
            id(m.parts),
            *(id(p) for p in m.parts),
            *(id(getattr(p, "content", None)) for p in m.parts),
            *(id(getattr(p, "metadata", None)) for p in m.parts),
        )
        for m in messages
    ]


# --- rules ----------------------------------------------------------------------------------------------------


def test_valid_history_is_returned_as_is() -> None:
    history = [
        req(SystemPromptPart("be brief"), user()),
        resp(TextPart("reading"), call("c1"), call("c2")),
        req(ret("c2"), ret("c1", outcome="failed")),  # parallel results in any order
        resp(TextPart("done")),
    ]
    assert patch(history) is history
    assert patch([]) == []


def test_call_without_result_gets_a_synthetic_one_right_after_its_response() -> None:
    response = resp(call("c1"), call("c2"))
    history = [req(user()), response, req(ret("c2"), user("and then?"))]
    out = patch(history)
    check_valid(out)
    assert out[:2] == history[:2]
    parts = out[2].parts
    assert [type(p).__name__ for p in parts] == ["ToolReturnPart", "ToolReturnPart", "UserPromptPart"]
    synthetic = parts[1]
    assert isinstance(synthetic, ToolReturnPart)
    assert synthetic.tool_call_id == "c1"
    assert synthetic.tool_name == "read_file"
    assert synthetic.outcome == "interrupted"
    assert synthetic.content == INTERRUPTED_RESULT_CONTENT
    assert synthetic.metadata == {SYNTHESIZED_TOOL_RETURN_METADATA_KEY: True, PATCH_METADATA_KEY: {"synthetic": True}}
    assert synthetic.timestamp == response.timestamp  # deterministic: patching twice gives the same part
    assert parts[0] is history[2].parts[0]


def test_synthetic_result_gets_its_own_request_when_a_response_follows() -> None:
    history = [req(user()), resp(call("c1")), resp(TextPart("gave up"))]
    out = patch(history)
    check_valid(out)
    assert len(out) == 4
    inserted = out[2]
    assert isinstance(inserted, ModelRequest)
    assert inserted.metadata == {PATCH_METADATA_KEY: {"inserted": "tool_results"}}
    assert [p.tool_call_id for p in results(out)] == ["c1"]


def test_history_ending_with_calls_is_made_request_ready() -> None:
    history = [req(user()), resp(call("c1"))]
    out = patch(history)
    assert validate_history(out, for_request=True) == []
    assert is_synthetic(out[-1].parts[0])


def test_capability_leaves_the_calls_of_a_suspended_last_response_alone() -> None:
    """In `before_model_request` a history ending with a response is a suspended turn being resumed."""
    from pydantic_deep.patch._processor import patch_tool_calls

    history = [req(user()), resp(call("c1")), req(ret("c1")), resp(call("c2"))]
    assert patch_tool_calls(history, close_last_response=False) is history
    assert validate_history(patch_tool_calls(history), for_request=True) == []


def test_late_result_is_moved_next_to_its_call_never_replaced() -> None:
    late = ret("c1", "LATE CONTENT")
    history = [
        req(user()),
        resp(call("c1")),
        req(user("meanwhile")),
        resp(call("c2")),
        req(ret("c2"), late),
    ]
    out = patch(history)
    check_valid(out)
    assert out[2].parts[0] is late  # moved unchanged, ahead of the user's text
    assert out[2].parts[1] is history[2].parts[0]
    assert out[4].parts == [history[4].parts[0]]
    assert not any(is_synthetic(p) for p in results(out))


def test_moved_result_leaves_no_empty_request_and_no_adjacent_responses() -> None:
    history = [req(user()), resp(call("c1")), resp(TextPart("ok")), req(ret("c1"))]
    out = patch(history)
    check_valid(out)
    assert [type(m).__name__ for m in out][:4] == ["ModelRequest", "ModelResponse", "ModelRequest", "ModelResponse"]
    assert out[2].parts[0] is history[3].parts[0]
    assert notes(out[4:]) == [PLACEHOLDER_PROMPT]  # it ended with a request, so it still does


def test_history_that_ended_with_a_response_may_end_with_one() -> None:
    history = [req(user()), resp(call("c1")), req(ret("c2")), resp(call("c2")), resp(TextPart("done"))]
    out = patch(history)
    check_valid(out)
    assert out[-1] is history[-1]


def test_history_that_ended_with_a_request_still_does() -> None:
    """The last request's only result moved up: a placeholder turn keeps the history ready for a request."""
    history = [req(user()), resp(call("c1")), resp(TextPart("ok")), req(ret("c1")), resp(TextPart("x")), req()]
    out = patch(history)
    check_valid(out)
    assert isinstance(out[-1], ModelRequest)
    assert notes(out[-1:]) == [PLACEHOLDER_PROMPT]


def test_result_before_its_call_is_moved_after_it() -> None:
    early = ret("c1", "EARLY")
    history = [req(early, user()), resp(call("c1")), req(user("next"))]
    out = patch(history)
    check_valid(out)
    assert out[0].parts == [history[0].parts[1]]
    assert out[2].parts[0] is early


def test_result_after_user_text_is_moved_before_it() -> None:
    """Results spread over the run of requests, with user text between, break Anthropic, OpenAI chat and Google
    when mapped directly: they all go to the request right after the call, before the user's text."""
    late = ret("c2")
    history = [req(user()), resp(call("c1"), call("c2")), req(ret("c1"), user("wait")), req(late)]
    out = patch(history)
    check_valid(out)
    assert out[2].parts[:2] == [history[2].parts[0], late]
    assert out[2].parts[2] is history[2].parts[1]
    assert len(out) == 3


def test_result_after_text_in_its_own_request_is_moved_first() -> None:
    result = ret("c1")
    history = [req(user()), resp(call("c1")), req(user("note"), result)]
    out = patch(history)
    check_valid(out)
    assert out[2].parts == [result, history[2].parts[0]]


def test_results_in_order_are_left_alone() -> None:
    history = [req(user()), resp(call("c1"), call("c2")), req(ret("c1"), ret("c2"), user("and then"))]
    assert patch(history) is history


def test_exact_duplicate_is_dropped() -> None:
    first = ret("c1", {"lines": 3})
    history = [req(user()), resp(call("c1")), req(first), req(copy.deepcopy(first), user("again"))]
    out = patch(history)
    check_valid(out)
    assert results(out) == [first]
    assert results(out)[0] is first  # nothing recorded: nothing was lost
    assert notes(out) == ["hi", "again"]


def test_different_duplicate_is_recorded_in_the_kept_results_metadata() -> None:
    retried = ret("c1", "bad args", outcome="retried")
    success = ret("c1", "the file", metadata={"mine": 1})
    history = [req(user()), resp(call("c1")), req(retried), resp(TextPart("hm")), req(success)]
    out = patch(history)
    check_valid(out)
    [kept] = results(out)
    assert kept.content == "the file"  # a final outcome wins over a retry request
    assert isinstance(kept, ToolReturnPart)
    assert kept.metadata["mine"] == 1
    [record] = kept.metadata[PATCH_METADATA_KEY]["duplicates"]
    assert record["content"] == "bad args"
    assert record["outcome"] == "retried"
    assert record["tool_call_id"] == "c1"
    assert success.metadata == {"mine": 1}  # the input part is untouched


def test_real_result_wins_over_a_synthetic_one_from_an_earlier_repair() -> None:
    """pydantic-ai closed the call out as interrupted; the real result arrived later."""
    history = repair_messages([req(user()), resp(call("c1"))])
    assert is_synthetic(history[-1].parts[0])
    real = ret("c1", "REAL")
    history = [*history, resp(TextPart("waiting")), req(real)]
    out = patch(history)
    check_valid(out)
    assert results(out) == [real]
    assert results(out)[0] is real


@pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")
def test_legacy_retry_prompt_is_a_result() -> None:
    retry = RetryPromptPart("wrong path", tool_name="read_file", tool_call_id="c1")  # pyright: ignore[reportDeprecated]
    history = [req(user()), resp(call("c1")), req(retry)]
    assert patch(history) is history
    late = [req(user()), resp(call("c1")), req(user("x")), resp(TextPart("y")), req(retry)]
    out = patch(late)
    check_valid(out)
    assert out[2].parts[0] is retry


@pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")
def test_duplicate_of_a_kept_retry_prompt_stays_as_a_note() -> None:
    """A legacy `RetryPromptPart` has no metadata to record a dropped duplicate in."""
    retry = RetryPromptPart("wrong path", tool_name="read_file", tool_call_id="c1")  # pyright: ignore[reportDeprecated]
    other = ret("c1", "also wrong", outcome="retried")
    history = [req(user()), resp(call("c1")), req(retry), req(other)]
    out = patch(history)
    check_valid(out)
    assert results(out) == [retry]
    assert any("also wrong" in n and "'c1'" in n for n in notes(out))


def test_orphan_result_becomes_a_note_in_the_same_request() -> None:
    image = ImageUrl("https://example.com/plot.png")
    history = [
        req(user()),
        resp(TextPart("hello")),
        req(ret("gone", {"rows": 3}, tool="query"), ret("gone2", ["see", image], tool="plot"), user("next")),
    ]
    out = patch(history)
    check_valid(out)
    first, second, third = out[2].parts
    assert isinstance(first, UserPromptPart) and isinstance(first.content, str)
    assert "'gone'" in first.content and "'query'" in first.content and '{"rows":3}' in first.content
    assert isinstance(second, UserPromptPart) and not isinstance(second.content, str)
    assert image in second.content  # files survive as files
    assert third is history[2].parts[2]


def test_history_starting_with_a_response_gets_a_user_turn_first() -> None:
    history = [resp(call("c1")), req(ret("c1")), resp(TextPart("done"))]
    out = patch(history)
    check_valid(out)
    assert notes(out[:1]) == [PLACEHOLDER_PROMPT]
    assert out[0].metadata == {PATCH_METADATA_KEY: {"inserted": "placeholder"}}
    assert out[1:] == history

    system_only = [req(SystemPromptPart("sys")), resp(TextPart("hello"))]
    out = patch(system_only)
    check_valid(out)
    assert out[0] is system_only[0] and notes(out) == [PLACEHOLDER_PROMPT]


def test_adjacent_text_responses_get_a_user_turn_between() -> None:
    history = [req(user()), resp(TextPart("a")), resp(TextPart("b")), req(user("c"))]
    out = patch(history)
    check_valid(out)
    assert notes(out) == ["hi", PLACEHOLDER_PROMPT, "c"]


def test_empty_requests_are_dropped() -> None:
    history = [req(user()), req(), resp(call("c1")), req(), resp(TextPart("x"))]
    out = patch(history)
    check_valid(out)
    assert [len(m.parts) for m in out] == [1, 1, 1, 1]
    assert is_synthetic(out[2].parts[0])  # the empty request after the call received its synthetic result


def test_summary_without_a_user_turn_gets_one() -> None:
    history = [req(SystemPromptPart("sys")), req(CompactionPart(content="## Intent\n- fix it"))]
    out = patch(history)
    check_valid(out)
    assert out[:2] == history and notes(out) == [PLACEHOLDER_PROMPT]


def test_input_is_never_mutated_and_patching_is_idempotent() -> None:
    history = [
        resp(call("c1"), call("c2")),
        req(ret("c2"), ret("zz")),
        resp(TextPart("a")),
        resp(TextPart("b")),
        req(ret("c1"), ret("c1", "other")),
    ]
    before = fingerprint(history)
    snapshot = copy.deepcopy(history)
    out = patch(history)
    check_valid(out)
    assert fingerprint(history) == before
    assert history == snapshot
    assert patch(out) is out


def test_call_is_synchronous_and_accepts_any_sequence() -> None:
    history = (req(user()), resp(TextPart("x")))
    out = patch(history)
    assert isinstance(out, list) and out == list(history)


def test_call_id_reused_across_responses_is_paired_per_response() -> None:
    """Some providers number calls per response (`call_0` every time): a result answers the latest call before it."""
    history = [
        req(user()),
        resp(call("call_0")),
        req(ret("call_0", "first")),
        resp(call("call_0")),
        req(ret("call_0", "second")),
    ]
    assert patch(history) is history
    history = [req(user()), resp(call("call_0")), resp(call("call_0")), req(ret("call_0", "second"))]
    out = patch(history)
    check_valid(out)
    assert is_synthetic(out[2].parts[0]) and results(out)[1].content == "second"


# --- in an agent ------------------------------------------------------------------------------------------------

BROKEN = [
    req(user("hi")),
    resp(call("c1")),
    req(user("meanwhile")),
    resp(TextPart("ok")),
    req(ret("c1", "LATE CONTENT")),
    resp(TextPart("ok2")),
]


@pytest.mark.parametrize(
    "capability", [PatchToolCalls(), ProcessHistory(PatchToolCalls())], ids=["capability", "process_history"]
)
async def test_in_an_agent_the_model_and_the_run_history_see_the_patched_form(capability: Any) -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return resp(TextPart("done"))

    agent = Agent(FunctionModel(model), capabilities=[capability])
    result = await agent.run("next", message_history=BROKEN)
    assert validate_history(seen[0], for_request=True) == []
    assert seen[0][2].parts[0] is BROKEN[4].parts[0]
    assert validate_history(result.all_messages(), for_request=False) == []
    assert any(p.content == "LATE CONTENT" for p in results(result.all_messages()))


def test_pydantic_ai_alone_drops_an_early_result_and_leaves_a_late_one_invalid() -> None:
    """Why the patch runs first: pydantic-ai's own repair drops a result that comes before its call (and answers
    the call as interrupted), and leaves a late result where a strict provider rejects it."""
    early = [req(ret("c1", "EARLY"), user()), resp(call("c1")), req(user("next"))]
    repaired = repair_messages(early)
    assert [p.content for p in results(repaired)] == ["The tool call was interrupted before a result was produced."]
    assert [p.content for p in results(patch(early))] == ["EARLY"]

    assert validate_history(repair_messages(BROKEN)) != []
    out = patch(BROKEN)
    assert validate_history(out, for_request=False) == []
    assert [p.content for p in results(out)] == ["LATE CONTENT"]


# --- property ---------------------------------------------------------------------------------------------------

_DAMAGES = st.sampled_from(
    (
        "drop_result",
        "move_later",
        "move_earlier",
        "duplicate",
        "duplicate_changed",
        "orphan",
        "drop_tail",
        "reorder",
        "cut_first",
        "repaired_then_late",
    )
)


def _result_positions(messages: list[ModelMessage]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest)
        for j, p in enumerate(m.parts)
        if isinstance(p, ToolReturnPart)
    ]


def _without(messages: list[ModelMessage], i: int, j: int) -> ToolReturnPart:
    """Take part `j` out of request `i` (a new message: the drawn history's objects are never edited)."""
    parts = list(messages[i].parts)
    part = parts.pop(j)
    assert isinstance(part, ToolReturnPart)
    messages[i] = dataclasses.replace(messages[i], parts=parts)  # type: ignore[arg-type]
    return part


def _into_request_at_or_after(messages: list[ModelMessage], at: int, part: ModelRequestPart, draw: Any) -> None:
    """Put `part` in the first request at or after `at` (a new one at the end if there is none)."""
    for k in range(max(at, 0), len(messages)):
        message = messages[k]
        if isinstance(message, ModelRequest):
            parts = list(message.parts)
            parts.insert(draw(st.integers(0, len(parts))), part)
            messages[k] = dataclasses.replace(message, parts=parts)
            return
    messages.append(req(part))


@st.composite
def damaged(draw: Any) -> list[ModelMessage]:
    messages = list(draw(histories(for_request=draw(st.booleans()))))
    orphans = 0
    for _ in range(draw(st.integers(1, 4))):
        if not messages:
            break
        damage = draw(_DAMAGES)
        positions = _result_positions(messages)
        if (
            damage
            in {"drop_result", "move_later", "move_earlier", "duplicate", "duplicate_changed", "repaired_then_late"}
            and positions
        ):
            i, j = draw(st.sampled_from(positions))
            if damage == "drop_result":
                _without(messages, i, j)
            elif damage == "move_later":
                part = _without(messages, i, j)
                _into_request_at_or_after(messages, i + draw(st.integers(1, 6)), part, draw)
            elif damage == "repaired_then_late":
                # pydantic-ai closed the call out as interrupted, then the real result turned up later
                part = _without(messages, i, j)
                messages = repair_messages(messages)
                _into_request_at_or_after(messages, i + draw(st.integers(0, 4)), part, draw)
            elif damage == "move_earlier":
                part = _without(messages, i, j)
                _into_request_at_or_after(messages, draw(st.integers(0, i)), part, draw)
            else:
                part = messages[i].parts[j]
                assert isinstance(part, ToolReturnPart)
                if damage == "duplicate_changed":
                    part = dataclasses.replace(part, content=f"another answer {draw(st.integers(0, 9))}")
                else:
                    part = copy.deepcopy(part)
                _into_request_at_or_after(messages, i + draw(st.integers(0, 4)), part, draw)
        elif damage == "orphan":
            orphans += 1
            part = ret(f"orphan_{orphans}", f"orphan content {orphans}", tool="grep")
            _into_request_at_or_after(messages, draw(st.integers(0, len(messages))), part, draw)
        elif damage == "drop_tail":
            del messages[draw(st.integers(1, len(messages))) :]
        elif damage == "reorder":
            i = draw(st.integers(0, len(messages) - 1))
            if isinstance(messages[i], ModelRequest):
                parts = draw(st.permutations(list(messages[i].parts)))
                messages[i] = dataclasses.replace(messages[i], parts=parts)  # type: ignore[arg-type]
        elif damage == "cut_first":
            del messages[0]
    return messages


def _text(part: ToolReturnPart) -> str:
    return part.model_response_str(wrap_if_error=False)


def _survives(part: ToolReturnPart, out: list[ModelMessage], kept: list[ToolReturnPart | RetryPromptPart]) -> bool:  # pyright: ignore[reportDeprecated]
    """The part's content is in the output: as a result for its call, recorded as a dropped duplicate of that
    result, or in a note naming its call."""
    for result in kept:
        if result.tool_call_id != part.tool_call_id:
            continue
        if result.content == part.content:
            return True
        metadata = getattr(result, "metadata", None)
        recorded = (
            ((metadata or {}).get(PATCH_METADATA_KEY) or {}).get("duplicates", []) if isinstance(metadata, dict) else []
        )
        if any(r["content"] == part.content for r in recorded):
            return True
    return any(repr(part.tool_call_id) in n and _text(part) in n for n in notes(out))


def _damaged_histories_come_out_valid_and_lose_no_result(messages: list[ModelMessage]) -> None:
    before = fingerprint(messages)
    out = patch(messages)
    assert fingerprint(messages) == before  # the input is untouched
    check_valid(out)

    # every call in the output has exactly one result, in the requests right after its response
    for k, m in enumerate(out):
        if not isinstance(m, ModelResponse):
            continue
        call_ids = {p.tool_call_id for p in m.parts if isinstance(p, ToolCallPart)}
        answers: list[str] = []
        for later in out[k + 1 :]:
            if isinstance(later, ModelResponse):
                break
            answers += [p.tool_call_id for p in results([later])]
        assert sorted(answers) == sorted(call_ids)

    # no real result is discarded, and no call that had a real result is answered by a synthetic one
    kept = results(out)
    real = [p for p in results(messages) if isinstance(p, ToolReturnPart) and not is_synthetic(p)]
    for part in real:
        assert _survives(part, out, kept), part
    had_real = {p.tool_call_id for p in real}
    for result in kept:
        if is_synthetic(result):
            assert result.tool_call_id not in had_real

    assert patch(out) is out  # idempotent: a patched history needs no patch


(
    test_property_damaged_histories_come_out_valid_and_lose_no_result,
    test_property_damaged_histories_come_out_valid_and_lose_no_result_full,
) = in_two_tiers(_damaged_histories_come_out_valid_and_lose_no_result, damaged(), quick=300, full=1_200)


@examples(300)
@given(st.booleans().flatmap(lambda for_request: histories(for_request=for_request)))
def test_property_valid_histories_are_returned_untouched(messages: list[ModelMessage]) -> None:
    assert patch(messages) is messages


@examples(300)
@given(damaged_histories())
def test_property_shared_damaged_histories_come_out_valid(messages: list[ModelMessage]) -> None:
    """The shared damage (messages deleted, duplicated, swapped, moved to the front; parts dropped)."""
    real = [p for p in results(messages) if isinstance(p, ToolReturnPart)]
    out = patch(messages)
    check_valid(out)
    kept = results(out)
    for part in real:
        assert _survives(part, out, kept), part
    assert patch(out) is out
