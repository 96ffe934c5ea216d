"""Options users of the peer library rely on: `LimitWarnerProcessor(warn_on=..., critical_remaining_iterations=...)`
and `keep_head` as `("messages", n)`, `("tokens", n)` or `("fraction", f)` on the processors that keep a head."""

from __future__ import annotations

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
from pydantic_ai.usage import UsageLimits

from summarization_pydantic_ai import (
    ContextEvent,
    LimitWarnerProcessor,
    LimitWarningIssued,
    SlidingWindowProcessor,
    SummarizationProcessor,
    estimate_message_tokens,
    is_summary_message,
    validate_history,
)

# --- LimitWarnerProcessor: warn_on and critical_remaining_iterations ---------------------------------------------


async def warnings_in_a_run(warner: LimitWarnerProcessor, *, steps: int, request_limit: int) -> list[str]:
    """The warning texts a scripted agent is shown at each of its model requests."""
    events: list[ContextEvent] = []
    warner.event_callback = events.append
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        # A mid-conversation system prompt reaches a FunctionModel as `<system>`-tagged text in the last request.
        warning = [str(p.content) for p in messages[-1].parts if "Limit warning" in str(p.content)]
        seen.append(warning[0].removeprefix("<system>").removesuffix("</system>") if warning else "")
        if step < steps:
            return ModelResponse(parts=[ToolCallPart("noop", {}, tool_call_id=f"c{step}")])
        return ModelResponse(parts=[TextPart("done " + "x" * 400)])

    agent = Agent(FunctionModel(model), capabilities=[warner])

    @agent.tool_plain
    def noop() -> str:
        return "ok " * 200

    await agent.run("go", usage_limits=UsageLimits(request_limit=request_limit))
    assert [e.text for e in events if isinstance(e, LimitWarningIssued)] == [s for s in seen if s]
    return seen


async def test_warn_on_chooses_which_limits_warn() -> None:
    context_only = LimitWarnerProcessor(warn_at=0.5, max_context_tokens=50, warn_on=["context_window"])
    seen = await warnings_in_a_run(context_only, steps=4, request_limit=5)
    assert all(s and "context" in s and "model request" not in s for s in seen)
    requests_only = LimitWarnerProcessor(warn_at=0.5, max_context_tokens=50, warn_on=("requests",))
    seen = await warnings_in_a_run(requests_only, steps=4, request_limit=5)
    assert seen[:2] == ["", ""]  # requests 1 and 2 of 5 are below half; the context never warns
    assert all("model request" in s and "context" not in s for s in seen[2:])


async def test_iteration_warnings_turn_critical_when_few_requests_are_left() -> None:
    warner = LimitWarnerProcessor(warn_at=0.5, critical_remaining_iterations=2, warn_on="iterations")
    seen = await warnings_in_a_run(warner, steps=9, request_limit=10)
    assert seen[:4] == [""] * 4
    assert seen[4].startswith("Limit warning: model request 5 of 10 (6 left")
    assert "critical" not in seen[7]  # request 8: 3 left
    assert seen[8].startswith("Limit warning (critical): model request 9 of 10 (2 left, this one included)")
    assert seen[9].startswith("Limit warning (critical): model request 10 of 10 (1 left")
    assert seen[9].endswith("Finish now: give your final answer.")


async def test_every_name_of_a_limit_is_accepted() -> None:
    history = [ModelRequest(parts=[UserPromptPart("x" * 400)])]
    for names in (["context"], ["context_window"], ["tokens", "context"], ["iterations", "requests", "context"]):
        warned = await LimitWarnerProcessor(warn_at=0.5, max_context_tokens=100, warn_on=names)(history)
        assert len(warned) == 2
    for names in (["tokens"], ["total_tokens"], ["iterations"], "requests"):  # no run: no usage to warn on
        assert await LimitWarnerProcessor(warn_at=0.5, max_context_tokens=100, warn_on=names)(history) == history
    over = await LimitWarnerProcessor(warn_at=0.5, max_context_tokens=100)(history)
    assert "(critical)" in str(over[-1].parts[0].content)  # the context is past its limit


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"warn_on": []}, ValueError, "at least one limit"),
        ({"warn_on": ["iterations", "turns"]}, ValueError, r"unknown limit\(s\) \['turns'\]"),
        ({"warn_on": "context window"}, ValueError, "unknown limit"),
        ({"critical_remaining_iterations": -1}, ValueError, "critical_remaining_iterations must be an int >= 0"),
        ({"critical_remaining_iterations": 1.5}, ValueError, "critical_remaining_iterations"),
        ({"critical_remaining_iterations": True}, ValueError, "critical_remaining_iterations"),
    ],
)
def test_limit_warner_options_are_validated(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        LimitWarnerProcessor(**kwargs)


# --- keep_head forms ------------------------------------------------------------------------------------------


def long_task() -> list[ModelMessage]:
    """A system prompt with the task, a long tool loop, and a new prompt: 2 + 2 * 12 + 1 = 27 messages."""
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("You are careful."), UserPromptPart("The task: " + "spec " * 100)]),
        ModelResponse(parts=[TextPart("Understood: " + "plan " * 60)]),
    ]
    for i in range(12):
        messages.append(ModelResponse(parts=[ToolCallPart("read", {"n": i}, tool_call_id=f"c{i}")]))
        messages.append(ModelRequest(parts=[ToolReturnPart("read", f"line {i}\n" * 40, tool_call_id=f"c{i}")]))
    messages.append(ModelRequest(parts=[UserPromptPart("Now finish.")]))
    return messages


def kept_head(messages: list[ModelMessage], out: list[ModelMessage]) -> int:
    """How many leading messages survived, the very same objects."""
    n = 0
    while n < min(len(messages), len(out)) and out[n] is messages[n]:
        n += 1
    return n


@pytest.mark.parametrize("processor_type", [SlidingWindowProcessor, SummarizationProcessor])
async def test_keep_head_accepts_messages_tokens_and_fractions(processor_type: Any) -> None:
    messages = long_task()
    first, second = (estimate_message_tokens(m) for m in messages[:2])

    async def head(keep_head: Any, **extra: Any) -> int:
        kwargs: dict[str, Any] = {"trigger": ("messages", 20), "keep": 4, "keep_head": keep_head, **extra}
        if processor_type is SummarizationProcessor:
            kwargs["model"] = None
        out = await processor_type(**kwargs)(messages)
        assert validate_history(out) == [] and any(map(is_summary_message, out))
        return kept_head(messages, out)

    assert await head(2) == await head(("messages", 2)) == 2  # an int keeps meaning messages
    assert await head(None) == 0 == await head(0)
    assert await head(("tokens", first + second)) == 2
    assert await head(("tokens", first + second - 1)) == 1
    assert await head(("tokens", first - 1)) == 0
    budget = 10_000
    assert await head(("fraction", (first + second) / budget), max_tokens=budget) == 2
    assert await head(("fraction", first / budget), max_tokens=budget) == 1
    assert await head(("messages", 3)) == 4  # a head ending on a call takes its result along


async def test_a_token_head_counts_with_the_processors_counter() -> None:
    messages = long_task()

    async def ten_per_message(history: Any) -> int:  # an async counter, asked once per message of the head
        return 10 * len(history)

    window = SlidingWindowProcessor(
        trigger=("messages", 20), keep=4, keep_head=("tokens", 25), token_counter=ten_per_message
    )
    assert kept_head(messages, await window(messages)) == 2


@pytest.mark.parametrize("processor_type", [SlidingWindowProcessor, SummarizationProcessor])
@pytest.mark.parametrize(
    ("keep_head", "error", "match"),
    [
        (-1, ValueError, "keep_head must be >= 0"),
        (("messages", -2), ValueError, "keep_head: messages must be >= 0"),
        (("tokens", 1.5), TypeError, "keep_head: tokens must be a whole number"),
        (("fraction", 1.5), ValueError, r"keep_head: a fraction must be in \[0, 1\]"),
        (("turns", 2), ValueError, "keep_head: unknown kind 'turns'"),
        ("2", TypeError, "keep_head must be a ContextSize"),
        (True, TypeError, "keep_head must be an int or a ContextSize"),
    ],
)
def test_keep_head_is_validated(processor_type: Any, keep_head: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        processor_type(keep_head=keep_head)
