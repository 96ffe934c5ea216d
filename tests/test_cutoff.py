"""Pair-safe cutoffs: `find_safe_cutoff`, the in-flight exchange, the kept head, and assembling a compaction."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from summarization_pydantic_ai import find_safe_cutoff, validate_history
from summarization_pydantic_ai._compaction import assemble, plan_compaction
from summarization_pydantic_ai._cutoff import inflight_start, safe_head_end, unanswered_start


def req(*parts: ModelRequestPart) -> ModelRequest:
    return ModelRequest(parts=list(parts))


def resp(*parts: ModelResponsePart) -> ModelResponse:
    return ModelResponse(parts=list(parts))


def user(text: str = "hi") -> UserPromptPart:
    return UserPromptPart(text)


def call(call_id: str) -> ToolCallPart:
    return ToolCallPart("grep", {"pattern": call_id}, call_id)


def ret(call_id: str, outcome: Any = "success") -> ToolReturnPart:
    return ToolReturnPart("grep", f"result of {call_id}", call_id, outcome=outcome)


def turns(n: int) -> list[ModelMessage]:
    """n plain question/answer turns."""
    out: list[ModelMessage] = []
    for i in range(n):
        out += [req(user(f"q{i}")), resp(TextPart(f"a{i}"))]
    return out


def tool_history() -> list[ModelMessage]:
    """0 prompt, 1 calls a+b, 2 results, 3 call c, 4 retried, 5 call d, 6 result, 7 answer, 8 new prompt."""
    return [
        req(SystemPromptPart("sys"), user("start")),
        resp(call("a"), call("b")),
        req(ret("a"), ret("b")),
        resp(call("c")),
        req(ret("c", outcome="retried")),
        resp(call("d")),
        req(ret("d")),
        resp(TextPart("done")),
        req(user("next")),
    ]


def pair_safe(messages: list[ModelMessage], cut: int) -> bool:
    kept_calls = {
        p.tool_call_id
        for m in messages[cut:]
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    }
    return all(
        p.tool_call_id in kept_calls
        for m in messages[cut:]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    )


# --- message keeps --------------------------------------------------------------------------------------------


def test_plain_message_keep() -> None:
    messages = [*turns(5), req(user("now"))]
    assert find_safe_cutoff(messages, 3) == len(messages) - 3
    assert find_safe_cutoff(messages, ("messages", 3)) == len(messages) - 3
    assert find_safe_cutoff(messages, 100) == 0
    assert find_safe_cutoff([], 3) == 0


@pytest.mark.parametrize("keep", [1, 2, 3, 4, 5])
def test_a_cut_between_a_call_and_its_result_moves_back_to_the_call(keep: int) -> None:
    messages = tool_history()
    cut = find_safe_cutoff(messages, keep)
    assert pair_safe(messages, cut)
    assert not isinstance(messages[cut], ModelRequest) or not any(
        isinstance(p, ToolReturnPart) for p in messages[cut].parts
    )
    assert cut == {1: 8, 2: 7, 3: 5, 4: 5, 5: 3}[keep]


def test_the_cut_moves_back_to_the_call_however_far_back_it_is() -> None:
    """Not a ±5 window: 40 parallel calls answered one request each put the first result 40 messages after
    the response that made the calls; a cut anywhere in those results moves back to that response."""
    ids = [f"c{i}" for i in range(40)]
    messages: list[ModelMessage] = [
        req(user("start")),
        resp(*[call(i) for i in ids]),
        *[req(ret(i)) for i in ids],
        resp(TextPart("done")),
        req(user("next")),
    ]
    assert {p.kind for p in validate_history(messages)} == {"split_results"}  # valid once pydantic-ai merges them
    for keep in (3, 4, 10, 30, 41, 43):
        assert find_safe_cutoff(messages, keep) == 1
    assert find_safe_cutoff(messages, 2) == len(messages) - 2
    assert find_safe_cutoff(messages, 44) == 0


def test_chained_pairs_close_transitively() -> None:
    """Each cut landing on results moves back to the response that made the calls."""
    messages = [
        req(user()),
        resp(call("a")),
        req(ret("a")),
        resp(call("b")),
        req(ret("b")),
        resp(TextPart("ok")),
        req(user("next")),
    ]
    assert find_safe_cutoff(messages, 3) == 3  # the cut lands on the results of b: back to the call of b
    assert find_safe_cutoff(messages, 5) == 1  # lands on the results of a: back to the call of a


# --- keep = 0: the in-flight exchange -------------------------------------------------------------------------


def test_keep_zero_keeps_the_new_user_prompt() -> None:
    messages = [*turns(3), req(user("now"))]
    assert find_safe_cutoff(messages, 0) == len(messages) - 1


def test_keep_zero_keeps_pending_results_with_the_calling_response() -> None:
    messages = [
        *turns(2),
        req(user("go")),
        resp(TextPart("thinking aloud"), call("c1"), call("c2")),
        req(ret("c2"), ret("c1")),
    ]
    cut = find_safe_cutoff(messages, 0)
    assert cut == 5  # the response that made the calls
    assert isinstance(messages[cut], ModelResponse)
    assert find_safe_cutoff(messages, ("tokens", 0)) == 5


def test_keep_zero_keeps_a_mixed_request_of_results_and_a_prompt() -> None:
    messages = [*turns(2), req(user("go")), resp(call("c1")), req(ret("c1"), user("and also this"))]
    assert find_safe_cutoff(messages, 0) == 5


def test_keep_zero_on_a_finished_run_keeps_the_final_exchange() -> None:
    messages = tool_history()[:-1]  # ends with the final answer
    cut = find_safe_cutoff(messages, 0)
    assert cut == 5  # final answer, the result before it, and the call that result answers
    assert validate_history([req(CompactionPart(content="s")), *messages[cut:]], for_request=False) == []


def test_inflight_start() -> None:
    messages = tool_history()
    assert inflight_start(messages) == 8
    assert inflight_start(messages[:-1]) == 6  # the final response and the request it answered
    assert inflight_start(messages[:7]) == 6
    assert inflight_start([req(user()), req(user("2"))]) == 1  # an unanswered earlier request is not in flight
    assert unanswered_start([req(user()), req(user("2"))]) == 0
    assert inflight_start([]) == 0


# --- token and fraction keeps ---------------------------------------------------------------------------------


def test_token_keep_counts_from_the_newest_message() -> None:
    messages = [*turns(5), req(user("now"))]
    ten_each = lambda message: 10  # noqa: E731
    assert find_safe_cutoff(messages, ("tokens", 35), message_tokens=ten_each) == len(messages) - 3
    assert find_safe_cutoff(messages, ("tokens", 30), message_tokens=ten_each) == len(messages) - 3
    assert find_safe_cutoff(messages, ("tokens", 29), message_tokens=ten_each) == len(messages) - 2
    assert find_safe_cutoff(messages, ("tokens", 10**9), message_tokens=ten_each) == 0


def test_token_keep_with_the_default_estimate() -> None:
    big = "word " * 2_000  # about 2,500 tokens
    messages = [req(user(big)), resp(TextPart(big)), req(user("short question"))]
    assert find_safe_cutoff(messages, ("tokens", 100)) == 2
    assert find_safe_cutoff(messages, ("tokens", 3_000)) == 1
    assert find_safe_cutoff(messages, ("tokens", 10_000)) == 0


def test_token_keep_is_pair_safe() -> None:
    messages = tool_history()
    for budget in range(0, 200, 5):
        assert pair_safe(messages, find_safe_cutoff(messages, ("tokens", budget), message_tokens=lambda m: 10))


def test_fraction_keep_is_a_share_of_max_tokens() -> None:
    messages = [*turns(5), req(user("now"))]
    ten_each = lambda message: 10  # noqa: E731
    by_fraction = find_safe_cutoff(messages, ("fraction", 0.35), max_tokens=100, message_tokens=ten_each)
    assert by_fraction == find_safe_cutoff(messages, ("tokens", 35), message_tokens=ten_each)


def test_fraction_keep_without_max_tokens_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"fraction.*max_tokens"):
        find_safe_cutoff([req(user())], ("fraction", 0.5))


# --- bad keeps ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keep", "error", "match"),
    [
        (-1, ValueError, r"keep must be >= 0, got -1"),
        (("messages", -3), ValueError, r"keep: messages must be >= 0"),
        (("tokens", -1), ValueError, r"keep: tokens must be >= 0"),
        (("fraction", 1.5), ValueError, r"keep: a fraction must be in \[0, 1\]"),
        (("fraction", -0.1), ValueError, r"keep: a fraction must be in \[0, 1\]"),
        (("bytes", 10), ValueError, r"keep: unknown kind 'bytes'"),
        (("messages", 2.5), TypeError, r"keep: messages must be a whole number"),
        (("tokens", "10"), TypeError, r"keep: the amount of 'tokens' must be a number"),
        (("messages",), TypeError, r"keep must be a ContextSize"),
        ("10", TypeError, r"keep must be a ContextSize"),
        (None, TypeError, r"keep must be a ContextSize"),
        (True, TypeError, r"keep must be an int or a ContextSize"),
        (2.0, TypeError, r"keep must be a ContextSize"),
    ],
)
def test_bad_keep_raises_a_clear_error(keep: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        find_safe_cutoff([req(user())], keep)


# --- the kept head and the assembled result -------------------------------------------------------------------


def test_safe_head_end_extends_over_answered_calls() -> None:
    messages = tool_history()
    assert safe_head_end(messages, 1) == 1
    assert safe_head_end(messages, 2) == 3  # a head ending on the calls keeps their results
    assert safe_head_end(messages, 4) == 5
    assert safe_head_end(messages, 100) == len(messages)
    assert safe_head_end(messages, 0) == 0


def test_safe_head_end_terminates_on_a_broken_history() -> None:
    """Calls followed straight by another response (no results) used to loop forever."""
    messages = [req(user()), resp(call("c1")), resp(TextPart("x")), req(user("again"))]
    assert safe_head_end(messages, 2) == 2
    assert plan_compaction(messages, 1, keep_head=2) is not None


def test_plan_splits_the_system_prompt_off_the_first_request() -> None:
    messages = tool_history()
    plan = plan_compaction(messages, 1)
    assert plan is not None
    assert (plan.head_end, plan.cutoff) == (0, 8)
    assert plan.system_head is not None
    assert [type(p) for p in plan.system_head.parts] == [SystemPromptPart]
    out = assemble(messages, plan, req(CompactionPart(content="summary")))
    assert validate_history(out) == []
    assert out[0] is plan.system_head and out[-1] is messages[-1]
    assert len(plan.span) == 8


def test_plan_keeps_a_system_only_first_request_and_the_head() -> None:
    messages = [req(SystemPromptPart("sys")), req(user("start")), *tool_history()[1:]]
    plan = plan_compaction(messages, 1, keep_head=0)
    assert plan is not None and plan.head_end == 1 and plan.system_head is None
    plan = plan_compaction(messages, 1, keep_head=3)
    assert plan is not None and plan.head_end == 4  # [sys, prompt, calls] + their results
    out = assemble(messages, plan, req(CompactionPart(content="summary")))
    assert validate_history(out) == []
    assert out[: plan.head_end] == messages[: plan.head_end]


def test_plan_feeds_earlier_summaries_separately() -> None:
    earlier = req(CompactionPart(content="earlier summary"))
    messages = [req(SystemPromptPart("sys")), earlier, *tool_history()[1:]]
    plan = plan_compaction(messages, 1)
    assert plan is not None
    assert plan.previous_summaries == ("earlier summary",)
    assert earlier not in plan.span


def test_plan_with_nothing_to_summarize() -> None:
    messages = [req(SystemPromptPart("sys")), req(CompactionPart(content="s")), req(user("now"))]
    assert plan_compaction(messages, 1) is None  # only an earlier summary before the tail
    assert plan_compaction([], 0) is None
    assert plan_compaction(tool_history(), 100) is None


def _spread_results_history() -> list[ModelMessage]:
    """A response's parallel results spread over two requests (as another framework may have saved them)."""
    return [
        req(user("task")),
        resp(call("a"), call("b")),
        req(ret("a")),
        req(ret("b")),
        resp(TextPart("read both")),
        *turns(10)[1:],
        req(user("next")),
    ]


def test_keep_head_never_splits_one_responses_results() -> None:
    messages = _spread_results_history()
    assert safe_head_end(messages, 3) == 4  # ending after "a"'s result would strand "b"'s result in the span
    plan = plan_compaction(messages, 2, keep_head=3)
    assert plan is not None and plan.head_end == 4
    result = assemble(messages, plan, req(CompactionPart(content="summary")))
    before = {(p.kind, p.tool_call_id) for p in validate_history(messages)}
    after = {(p.kind, p.tool_call_id) for p in validate_history(result)}
    assert after <= before  # no new problem: in particular no orphan call "b"


async def test_processor_with_keep_head_still_compacts_spread_results() -> None:
    from summarization_pydantic_ai import SummarizationProcessor, is_summary_message

    processor = SummarizationProcessor(model=None, trigger=("messages", 10), keep=2, keep_head=3)
    messages = _spread_results_history()
    result = await processor(messages)
    assert any(is_summary_message(m) for m in result), "compaction must happen"
    assert result[:4] == messages[:4]
