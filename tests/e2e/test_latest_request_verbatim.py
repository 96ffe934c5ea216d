"""The latest user request survives every compaction path verbatim: all its text and its image, as parts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    SlidingWindowProcessor,
    SummarizationProcessor,
    is_summary_message,
    validate_history,
)

TEXT = "".join(f"Requirement {i:04d}: keep every word of this request exactly as written. " for i in range(160))
IMAGE = BinaryContent(data=b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40, media_type="image/png")
REQUEST: list[UserContent] = [TEXT, IMAGE]


def _has_request_verbatim(messages: list[ModelMessage]) -> bool:
    for message in messages:
        for part in message.parts if isinstance(message, ModelRequest) else ():
            if isinstance(part, UserPromptPart) and isinstance(part.content, list):
                content = list(part.content)
                if content == REQUEST and isinstance(content[1], BinaryContent) and content[1].data == IMAGE.data:
                    return True
    return False


class ToolLoop:
    """Calls `read` `calls` times after the prompt (large outputs), then answers; records what it was sent."""

    def __init__(self, calls: int, overflow_above: int | None = None) -> None:
        self.calls, self.overflow_above = calls, overflow_above
        self.seen: list[list[ModelMessage]] = []
        self.made = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if self.overflow_above is not None and len(messages) > self.overflow_above:
            raise ModelHTTPError.for_category(
                ModelContextWindowExceededError, status_code=400, model_name="test", body="prompt is too long"
            )
        self.seen.append(list(messages))
        if self.made < self.calls:
            self.made += 1
            return ModelResponse(parts=[ToolCallPart("read", {"n": self.made}, tool_call_id=f"c{self.made}")])
        return ModelResponse(parts=[TextPart("done")])


def _agent(model: ToolLoop, capability: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[capability])

    @agent.tool_plain
    def read(n: int) -> str:
        return f"output {n}\n" + "x = 1\n" * 1_000

    return agent


def _old_turns() -> list[ModelMessage]:
    return [ModelRequest(parts=[UserPromptPart("an older question")]), ModelResponse(parts=[TextPart("an answer")])]


def _assert_kept_after_compaction(model: ToolLoop) -> None:
    compacted = [seen for seen in model.seen if any(is_summary_message(m) for m in seen)]
    assert compacted, "the scenario must compact at least once"
    for seen in compacted:
        assert validate_history(seen) == []
        assert _has_request_verbatim(seen), "the latest request lost text or its image"


@pytest.mark.parametrize(
    "capability",
    [
        SummarizationProcessor(model=None, trigger=("messages", 8), keep=("messages", 2), max_tokens=1_000_000),
        SlidingWindowProcessor(trigger=("messages", 8), keep=("messages", 2)),
    ],
    ids=["summarization", "sliding-window"],
)
async def test_processors_carry_the_latest_request(capability: Any) -> None:
    model = ToolLoop(calls=8)
    result = await _agent(model, capability).run(REQUEST, message_history=_old_turns())
    assert result.output == "done"
    _assert_kept_after_compaction(model)


async def test_automatic_compaction_in_the_middleware_carries_the_latest_request() -> None:
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=12_000, keep=2)
    model = ToolLoop(calls=8)
    result = await _agent(model, middleware).run(REQUEST, message_history=_old_turns())
    assert result.output == "done" and middleware.compression_count >= 1
    _assert_kept_after_compaction(model)


async def test_compact_carries_the_latest_request() -> None:
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=1_000_000, keep=2)
    model = ToolLoop(calls=6)
    result = await _agent(model, middleware).run(REQUEST, message_history=_old_turns())
    compacted = await middleware.compact([*result.all_messages(), ModelRequest(parts=[UserPromptPart("go on")])])
    assert any(is_summary_message(m) for m in compacted)
    assert validate_history(compacted) == []
    # "go on" is now the latest request and is in the kept tail; the carried request was the latest before it.
    latest = compacted[-1].parts[-1]
    assert isinstance(latest, UserPromptPart) and latest.content == "go on"


async def test_compact_mid_loop_carries_the_latest_request() -> None:
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=1_000_000, keep=2)
    model = ToolLoop(calls=6)
    result = await _agent(model, middleware).run(REQUEST, message_history=_old_turns())
    history = result.all_messages()[:-1]  # ends with the last tool result: the loop is in flight
    compacted = await middleware.compact(history)
    assert any(is_summary_message(m) for m in compacted)
    assert validate_history(compacted) == []
    assert _has_request_verbatim(compacted)


async def test_overflow_retry_carries_the_latest_request() -> None:
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=1_000_000, keep=2)
    model = ToolLoop(calls=6, overflow_above=9)
    result = await _agent(model, middleware).run(REQUEST, message_history=_old_turns())
    assert result.output == "done" and middleware.compression_count >= 1
    _assert_kept_after_compaction(model)
