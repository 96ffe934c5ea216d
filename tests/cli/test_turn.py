"""What a cancelled or failed turn leaves in the history: what the run committed, and always the user's message."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from pydantic_deep.cli._turn import keep_cancelled_turn


def _user(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text)])


def _answer(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


BEFORE: list[ModelMessage] = [_user("hello"), _answer("hi")]


def test_cancelled_before_the_run_started_keeps_the_message() -> None:
    kept = keep_cancelled_turn(BEFORE, [], "hello")  # the same words as an earlier prompt: still added
    assert kept[:2] == BEFORE and len(kept) == 3
    assert isinstance(kept[2], ModelRequest) and kept[2].parts == [
        UserPromptPart("hello", timestamp=kept[2].parts[0].timestamp)
    ]  # type: ignore[attr-defined]


def test_what_the_run_committed_is_kept_as_it_is() -> None:
    request, partial = _user("slow"), _answer("word0 word1")
    kept = keep_cancelled_turn(BEFORE, [*BEFORE, request, partial], "slow")
    assert kept == [*BEFORE, request, partial] and kept[2] is request


def test_a_run_compacted_before_it_was_cancelled_keeps_its_shorter_history() -> None:
    summary, request = _user("summary of earlier messages"), _user("next")
    kept = keep_cancelled_turn(BEFORE, [summary, request], "next")
    assert kept == [summary, request]
