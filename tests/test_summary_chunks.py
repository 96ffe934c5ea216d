"""Issue 10, scope 2: the summarizer reads the span in as few calls as its own window allows:
ceil(span tokens / (window - reserve)), a window it does not know being the agent's budget, else 200,000."""

from __future__ import annotations

import math

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import LLMSummarizer, SummaryRequest, render_messages


def span(pairs: int, output_chars: int = 2_000) -> list[ModelMessage]:
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("Audit every module.")])]
    for i in range(pairs):
        call = ToolCallPart("read_file", {"path": f"src/module_{i}.py"}, tool_call_id=f"c{i}")
        messages.append(ModelResponse(parts=[call]))
        messages.append(
            ModelRequest(
                parts=[ToolReturnPart("read_file", f"# module {i}\n" + "x" * output_chars, tool_call_id=f"c{i}")]
            )
        )
    return messages


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        return ModelResponse(parts=[TextPart(f"summary after {self.calls} call(s)")])


def target(messages: list[ModelMessage], window: int, reserve: int) -> int:
    return math.ceil(len(render_messages(messages)) / 4 / (window - reserve))


@pytest.mark.parametrize(("window", "pairs"), [(20_000, 200), (50_000, 400), (None, 300)])
async def test_calls_follow_the_summarizer_window(window: int | None, pairs: int) -> None:
    model = Counting()
    summarizer = LLMSummarizer(FunctionModel(model))
    messages = span(pairs)
    await summarizer.summarize(SummaryRequest(messages=messages, window_tokens=window))
    expected = target(messages, window or 200_000, summarizer.reserve_tokens)
    # A message never straddles two calls, so a call can end up to one message short of full.
    assert expected <= model.calls <= expected + 1


def test_the_input_budget_is_the_window_minus_the_reserve() -> None:
    summarizer = LLMSummarizer(FunctionModel(Counting()), reserve_tokens=4_000)
    assert summarizer.input_budget_tokens(SummaryRequest(messages=[], window_tokens=60_000)) == 56_000
    assert summarizer.input_budget_tokens(SummaryRequest(messages=[])) == 196_000  # unknown: 200,000
    assert LLMSummarizer(FunctionModel(Counting()), max_input_tokens=5_000).input_budget_tokens() == 5_000
    with pytest.raises(ValueError, match="reserve_tokens"):
        LLMSummarizer(FunctionModel(Counting()), reserve_tokens=-1)
