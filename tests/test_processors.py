"""Processor behaviour in plain form, construction errors, and async counters in every position."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
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
from pydantic_ai.usage import UsageLimits

from summarization_pydantic_ai import (
    ClearToolResultsProcessor,
    CompactionSkipped,
    ContextEvent,
    LimitWarnerProcessor,
    SlidingWindowProcessor,
    SummarizationProcessor,
    ToolResultsCleared,
    count_tokens_approximately,
    is_summary_message,
    validate_history,
)
from summarization_pydantic_ai.processors import CLEARED_METADATA_KEY, WARNING_METADATA_KEY


def tool_loop(n_calls: int, *, size: int = 2_000, system: bool = True) -> list[ModelMessage]:
    first: list[Any] = [SystemPromptPart("You are careful.")] if system else []
    messages: list[ModelMessage] = [ModelRequest(parts=[*first, UserPromptPart("Investigate the logs.")])]
    for i in range(n_calls):
        messages.append(ModelResponse(parts=[ToolCallPart("read_log", {"n": i}, tool_call_id=f"call_{i}")]))
        messages.append(
            ModelRequest(parts=[ToolReturnPart("read_log", f"line {i}\n" * (size // 7), tool_call_id=f"call_{i}")])
        )
    return messages


async def async_counter(messages: Any) -> int:
    return count_tokens_approximately(messages)


# --- SummarizationProcessor -------------------------------------------------------------------------------------


async def test_summarization_keeps_system_prompt_and_a_pair_safe_tail() -> None:
    history = tool_loop(30)
    processor = SummarizationProcessor(None, trigger=("messages", 40), keep=("messages", 5))
    result = await processor(history)
    assert validate_history(result) == []
    assert isinstance(result[0], ModelRequest) and isinstance(result[0].parts[0], SystemPromptPart)
    assert not any(isinstance(p, UserPromptPart) for p in result[0].parts), "the user prompt was summarized"
    assert is_summary_message(result[1])
    assert all(a is b for a, b in zip(result[2:], history[len(history) - len(result) + 2 :], strict=True))


async def test_below_the_trigger_nothing_changes_and_the_list_is_returned_as_is() -> None:
    history = tool_loop(3)
    processor = SummarizationProcessor(None, trigger=("tokens", 1_000_000), keep=2)
    result = await processor(history)
    assert len(result) == len(history) and all(a is b for a, b in zip(result, history, strict=True))


async def test_nothing_new_to_summarize_is_skipped_and_reported() -> None:
    events: list[ContextEvent] = []
    # One huge in-flight tool result: above the trigger, but nothing before it can be summarized.
    history = tool_loop(1, size=100_000, system=False)[1:]
    history.insert(0, ModelRequest(parts=[CompactionPart(content="earlier summary")]))
    processor = SummarizationProcessor(None, trigger=("tokens", 1_000), keep=0, event_callback=events.append)
    assert await processor(history) is history
    assert [type(e) for e in events] == [CompactionSkipped]


async def test_compact_now_ignores_the_trigger_and_uses_focus() -> None:
    history = tool_loop(5)
    processor = SummarizationProcessor(None, trigger=("tokens", 10_000_000), keep=0)
    result = await processor.compact(history, focus="which logs were read")
    summary = result[1]
    assert is_summary_message(summary)
    assert "which logs were read" in str(summary.parts[0].content)  # type: ignore[union-attr]


async def test_async_counter_in_every_position() -> None:
    history = tool_loop(20)
    for keep in (0, 3, ("tokens", 2_000), ("fraction", 0.01), ("messages", 4)):
        for trigger in (("tokens", 5_000), ("fraction", 0.05), [("messages", 10), ("tokens", 10**9)]):
            processor = SummarizationProcessor(
                None, trigger=trigger, keep=keep, max_tokens=200_000, token_counter=async_counter
            )
            result = await processor(history)
            assert validate_history(result) == [], (trigger, keep)
            assert len(result) < len(history), (trigger, keep)
            window = SlidingWindowProcessor(trigger=trigger, keep=keep, max_tokens=200_000, token_counter=async_counter)
            trimmed = await window(history)
            assert validate_history(trimmed) == [], (trigger, keep)
    clearing = ClearToolResultsProcessor(trigger=("tokens", 100), token_counter=async_counter)
    assert validate_history(await clearing(history)) == []
    warner = LimitWarnerProcessor(max_context_tokens=1_000, token_counter=async_counter)
    assert validate_history(await warner(history)) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"trigger": ("messages", 0)}, ValueError, "messages must be > 0"),
        ({"trigger": ("tokens", -5)}, ValueError, "must be > 0"),
        ({"trigger": ("fraction", 1.5)}, ValueError, "fraction must be in"),
        ({"trigger": ("bytes", 10)}, ValueError, "unknown kind"),
        ({"trigger": ("tokens", 10.5)}, TypeError, "whole number"),
        ({"trigger": "tokens"}, TypeError, "ContextSize"),
        ({"trigger": []}, ValueError, "empty list"),
        ({"keep": -1}, ValueError, "keep must be >= 0"),
        ({"keep": ("messages", -2)}, ValueError, "keep"),
        ({"keep": True}, TypeError, "keep"),
        ({"trigger": ("messages", 10), "keep": 10}, ValueError, "smaller than trigger"),
        ({"keep_head": -1}, ValueError, "keep_head"),
        ({"token_counter": 5}, TypeError, "token_counter"),
        ({"prompt_template": "no placeholder here"}, ValueError, r"\{messages\}"),
        ({"prompt_template": "{messages} {typo}"}, ValueError, r"unknown placeholder"),
        ({"model": 3.5}, TypeError, "model must be"),
    ],
)
def test_bad_settings_fail_at_construction(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        SummarizationProcessor(**kwargs)


def test_a_template_with_stray_braces_works() -> None:
    template = 'Summarize {messages}. Keep JSON like {"a": 1} and a lone { brace. {previous_summary}'
    processor = SummarizationProcessor(
        FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("s")])), prompt_template=template
    )
    assert processor.prompt_template == template


async def test_a_custom_template_reaches_the_model_literally() -> None:
    prompts: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1].parts[0].content))  # type: ignore[union-attr]
        return ModelResponse(parts=[TextPart("custom summary")])

    template = 'JSON {"keep": true} then {messages} end'
    processor = SummarizationProcessor(FunctionModel(model), trigger=("messages", 5), keep=0, prompt_template=template)
    await processor(tool_loop(4))
    assert prompts[0].startswith('JSON {"keep": true} then --- message')


# --- SlidingWindowProcessor -------------------------------------------------------------------------------------


async def test_sliding_window_marks_the_gap_and_counts_dropped_messages_cumulatively() -> None:
    processor = SlidingWindowProcessor(trigger=("messages", 20), keep=6)
    history = tool_loop(15)
    once = await processor(history)
    assert validate_history(once) == []
    marker = once[1]
    assert is_summary_message(marker)
    dropped_first = len(history) - (len(once) - 2)  # all but the tail; the system prompt was split off
    assert f"[{dropped_first} earlier messages" in str(marker.parts[0].content)  # type: ignore[union-attr]
    grown = [*once, *tool_loop(10, system=False)[1:]]
    twice = await processor(grown)
    assert validate_history(twice) == []
    text = str(twice[1].parts[0].content)  # type: ignore[union-attr]
    assert f"[{dropped_first + len(grown) - len(twice)} earlier messages" in text


async def test_sliding_window_keep_head_keeps_the_original_task() -> None:
    processor = SlidingWindowProcessor(trigger=("messages", 10), keep=4, keep_head=1)
    history = tool_loop(10)
    result = await processor(history)
    assert result[0] is history[0]
    assert validate_history(result) == []


# --- ClearToolResultsProcessor ----------------------------------------------------------------------------------


async def test_clear_tool_results_in_batches_and_only_once() -> None:
    events: list[ContextEvent] = []
    processor = ClearToolResultsProcessor(keep_last=2, clear_at_least=1_000, event_callback=events.append)
    history = tool_loop(3, size=1_000)  # one clearable result of ~250 tokens: below the batch size
    assert await processor(history) is history
    history = tool_loop(8, size=1_000)
    cleared = await processor(history)
    returns = [p for m in cleared for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [CLEARED_METADATA_KEY in (p.metadata or {}) for p in returns] == [True] * 6 + [False] * 2
    assert "call_0" in str(returns[0].content) and "read_log" in str(returns[0].content)
    assert returns[-1].content == history[-1].parts[0].content  # type: ignore[union-attr]
    assert validate_history(cleared) == []
    assert len(events) == 1 and isinstance(events[0], ToolResultsCleared) and events[0].cleared == 6
    # Nothing new to reclaim: the cleared history is returned as it is (the cached prefix stays valid).
    assert await processor(cleared) is cleared


async def test_clear_tool_results_respects_exclusions_and_placeholder_errors() -> None:
    processor = ClearToolResultsProcessor(keep_last=0, clear_at_least=0, exclude_tools=["read_log"])
    history = tool_loop(4)
    assert await processor(history) is history
    with pytest.raises(ValueError, match="placeholder"):
        ClearToolResultsProcessor(placeholder="{unknown}")


# --- LimitWarnerProcessor ---------------------------------------------------------------------------------------


async def test_limit_warner_keeps_one_trailing_warning() -> None:
    processor = LimitWarnerProcessor(max_context_tokens=2_000, warn_at=0.5)
    history = tool_loop(5)
    warned = await processor(history)
    assert len(warned) == len(history) + 1
    warning = warned[-1].parts[0]
    assert isinstance(warning, SystemPromptPart) and WARNING_METADATA_KEY in (warning.metadata or {})
    again = await processor([*warned, *tool_loop(1, system=False)[1:]])
    warnings = [p for m in again for p in m.parts if WARNING_METADATA_KEY in (getattr(p, "metadata", None) or {})]
    assert len(warnings) == 1 and again[-1].parts[0] is warnings[0]
    assert validate_history(again) == []


async def test_limit_warner_in_a_run_sees_request_limits() -> None:
    seen_warnings: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # A mid-conversation system prompt reaches a FunctionModel merged into the last request.
        seen_warnings.extend(str(p.content) for p in messages[-1].parts if "Limit warning" in str(p.content))
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < 4:
            return ModelResponse(parts=[ToolCallPart("noop", {}, tool_call_id=f"c{step}")])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(model), capabilities=[LimitWarnerProcessor(warn_at=0.6)])

    @agent.tool_plain
    def noop() -> str:
        return "ok"

    await agent.run("go", usage_limits=UsageLimits(request_limit=5))
    assert seen_warnings, "the model saw a warning"
    assert "model request" in seen_warnings[-1]


def test_limit_warner_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="warn_at"):
        LimitWarnerProcessor(warn_at=0)
    with pytest.raises(ValueError, match="max_iterations"):
        LimitWarnerProcessor(max_iterations=0)
