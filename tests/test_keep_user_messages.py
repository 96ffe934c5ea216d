"""`keep_user_messages`: every user turn kept verbatim through compaction (newest first, within a token budget of
its own) on the summarization paths: SummarizationProcessor and ContextManagerMiddleware."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
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
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    CompactionCompleted,
    ContextEvent,
    ContextManagerMiddleware,
    SlidingWindowProcessor,
    SummarizationProcessor,
    estimate_message_tokens,
    is_summary_message,
    summary_part,
    validate_history,
)

ASKS = [f"Request {i}: rename the {name} module and keep its public names." for i, name in enumerate("abcdefgh")]


def session(asks: list[str]) -> list[ModelMessage]:
    """A system prompt, then per request two tool steps with large outputs and an answer; ends with a new ask."""
    messages: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart("You refactor code.")])]
    for i, ask in enumerate(asks[:-1]):
        messages.append(ModelRequest(parts=[UserPromptPart(ask)]))
        for k in range(2):
            call_id = f"c{i}-{k}"
            messages.append(ModelResponse(parts=[ToolCallPart("read", {"n": k}, tool_call_id=call_id)]))
            messages.append(ModelRequest(parts=[ToolReturnPart("read", "code line\n" * 300, tool_call_id=call_id)]))
        messages.append(ModelResponse(parts=[TextPart(f"Done with request {i}.")]))
    messages.append(ModelRequest(parts=[UserPromptPart(asks[-1])]))
    return messages


def prompts_outside_summaries(messages: list[ModelMessage]) -> list[str]:
    """The user prompts the model reads as prompts (not quoted inside a summary's text)."""
    return [str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart)]


def summary_text(messages: list[ModelMessage]) -> str:
    return "".join((summary_part(m).content or "") for m in messages if summary_part(m) is not None)  # type: ignore[union-attr]


async def test_summarization_keeps_every_user_turn_verbatim() -> None:
    history = session(ASKS)
    events: list[ContextEvent] = []
    processor = SummarizationProcessor(
        None, trigger=("messages", 30), keep=2, keep_user_messages=10_000, event_callback=events.append
    )
    out = await processor(history)
    assert validate_history(out) == []
    assert prompts_outside_summaries(out) == ASKS  # every turn, in order, the latest last
    assert len(out) < len(history) // 4
    (completed,) = [e for e in events if isinstance(e, CompactionCompleted)]
    kept = [p for p in completed.preserved if p.kind == "user_message"]
    assert len(kept) == len(ASKS) - 1 and all(p.moved for p in kept)
    assert "Request 3" not in summary_text(out)  # kept verbatim, so not summarized twice


async def test_the_budget_keeps_the_newest_turns_that_fit() -> None:
    history = session(ASKS)
    one = estimate_message_tokens(ModelRequest(parts=[UserPromptPart(ASKS[0])]))
    processor = SummarizationProcessor(None, trigger=("messages", 30), keep=2, keep_user_messages=3 * one)
    out = await processor(history)
    assert prompts_outside_summaries(out) == ASKS[-4:]  # three kept turns and the latest request
    off = await SummarizationProcessor(None, trigger=("messages", 30), keep=2)(history)
    assert prompts_outside_summaries(off) == ASKS[-1:]


async def test_kept_turns_survive_the_next_compaction_too() -> None:
    processor = SummarizationProcessor(None, trigger=("messages", 20), keep=2, keep_user_messages=True)
    first = await processor(session(ASKS[:5]))
    assert prompts_outside_summaries(first) == ASKS[:5]
    more = session(["x", *ASKS[5:]])[2:]  # three more requests with their tool steps
    second = await processor([*first, *more])
    assert sum(map(is_summary_message, second)) == 1  # one rolling summary
    assert prompts_outside_summaries(second) == ASKS
    assert validate_history(second) == []


async def test_the_middleware_keeps_user_turns_through_a_compaction(tmp_path: Path) -> None:
    sent: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(messages)
        # Answers long enough for a summary of them to be smaller (a compaction never grows the context).
        return ModelResponse(parts=[TextPart(f"answer {len(sent)}: " + "renamed, imports updated, tests green. " * 20)])

    middleware = ContextManagerMiddleware(
        messages_path=tmp_path / "messages.json", summarization_model=None, keep_user_messages=5_000
    )
    agent = Agent(FunctionModel(model), capabilities=[middleware])
    history: list[ModelMessage] = []
    for ask in ASKS[:4]:
        history = (await agent.run(ask, message_history=history)).all_messages()
    middleware.request_compact()
    result = await agent.run(ASKS[4], message_history=history)
    assert any(map(is_summary_message, sent[-1]))
    assert prompts_outside_summaries(sent[-1]) == ASKS[:5]
    assert validate_history(result.all_messages(), for_request=False) == []


async def test_the_sliding_window_keeps_them_too() -> None:
    out = await SlidingWindowProcessor(trigger=("messages", 30), keep=2, keep_user_messages=True)(session(ASKS))
    assert prompts_outside_summaries(out) == ASKS


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (-1, ValueError, "keep_user_messages must be >= 0 tokens"),
        ("all", TypeError, "keep_user_messages must be a bool or an int"),
        (0.5, TypeError, "keep_user_messages must be a bool or an int"),
    ],
)
def test_keep_user_messages_is_validated(value: Any, error: type[Exception], match: str) -> None:
    for make in (
        lambda: SummarizationProcessor(None, keep_user_messages=value),
        lambda: ContextManagerMiddleware(keep_user_messages=value),
    ):
        with pytest.raises(error, match=match):
            make()
