"""End-to-end: processors inside `Agent.run` with scripted `FunctionModel`s."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    DEFAULT_REQUIRED_SECTIONS,
    SUMMARY_METADATA_KEY,
    CompactionCompleted,
    ContextEvent,
    SlidingWindowProcessor,
    SummarizationProcessor,
    is_summary_message,
    validate_history,
)


@dataclass
class ScriptedAgentModel:
    """Calls `read` `tool_calls` times, then answers; records what every request contained."""

    tool_calls: int
    seen: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        step = len(self.seen)
        if step <= self.tool_calls:
            return ModelResponse(
                parts=[ToolCallPart("read", {"path": f"/data/file{step}.txt"}, tool_call_id=f"c{step}")]
            )
        return ModelResponse(parts=[TextPart("all files read")])


def valid_summary(text: str, latest: str) -> str:
    """`text` in a summary that passes the checks: every required section and the latest request."""
    rest = "\n".join(f"## {title}\nnone" for title in DEFAULT_REQUIRED_SECTIONS[1:])
    return f"## Intent\n{text}\n{rest}\n## Latest user request\n{latest}"


@dataclass
class SummaryModel:
    """A summary model that records its inputs and answers with a valid summary holding `text`."""

    text: str = "SUMMARY: the user asked to read the data files; files 1-3 were read."
    prompts: list[str] = field(default_factory=list[str])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        self.prompts.extend(str(p.content) for p in last.parts if isinstance(p, UserPromptPart))
        latest = self.prompts[-1].split("<latest_user_request>\n")[-1].split("\n</latest_user_request>")[0]
        return ModelResponse(parts=[TextPart(valid_summary(self.text, latest))])


def make_agent(model: ScriptedAgentModel, *capabilities: object) -> Agent[None, str]:
    agent = Agent(FunctionModel(model), capabilities=list(capabilities), instructions="Read what is asked.")  # type: ignore[arg-type]

    @agent.tool_plain
    def read(path: str) -> str:
        return f"contents of {path}\n" * 40

    return agent


def summaries(messages: list[ModelMessage]) -> list[ModelMessage]:
    return [m for m in messages if is_summary_message(m)]


async def test_capability_compacts_once_mid_run_and_persists() -> None:
    script = ScriptedAgentModel(tool_calls=6)  # requests carry 1, 3, 5, 7, 9 (compaction -> 3), 5 messages
    summary_model = SummaryModel()
    events: list[ContextEvent] = []
    processor = SummarizationProcessor(
        FunctionModel(summary_model), trigger=("messages", 9), keep=0, event_callback=events.append
    )
    result = await make_agent(script, processor).run("Read all the data files.")

    assert len(summary_model.prompts) == 1, "the summary model is called exactly once"
    all_messages = result.all_messages()
    assert len(summaries(all_messages)) == 1
    assert validate_history(all_messages, for_request=False) == []
    compaction_step = next(i for i, seen in enumerate(script.seen) if summaries(seen))
    # Every request after the compaction starts from the same summary object: it was written into the run's
    # history once and not recomputed.
    first_summary = summaries(script.seen[compaction_step])[0]
    for seen in script.seen[compaction_step:]:
        assert summaries(seen) == [first_summary]
        assert summaries(seen)[0] is first_summary
    assert [type(e).__name__ for e in events].count("CompactionCompleted") == 1
    assert result.output == "all files read"


async def test_summary_message_carries_provenance() -> None:
    script = ScriptedAgentModel(tool_calls=4)
    processor = SummarizationProcessor(None, trigger=("messages", 7), keep=0)
    result = await make_agent(script, processor).run("Read the data files.")
    (summary,) = summaries(result.all_messages())
    assert isinstance(summary, ModelRequest)
    part = summary.parts[0]
    assert isinstance(part, CompactionPart)
    info = part.metadata[SUMMARY_METADATA_KEY] if part.metadata else {}
    assert info["summarizer"] == "deterministic"
    assert info["covered_messages"] == 5  # prompt + 2 exchanges; the in-flight exchange is kept
    assert "created_at" in info
    assert part.content and "/data/file1.txt" in part.content


async def test_process_history_form_also_persists() -> None:
    script = ScriptedAgentModel(tool_calls=6)
    summary_model = SummaryModel()
    processor = SummarizationProcessor(FunctionModel(summary_model), trigger=("messages", 9), keep=2)
    result = await make_agent(script, ProcessHistory(processor)).run("Read all the data files.")
    assert len(summary_model.prompts) == 1
    assert len(summaries(result.all_messages())) == 1
    assert validate_history(result.all_messages(), for_request=False) == []


async def test_tokens_trigger_counts_instructions_and_tools_in_capability_form() -> None:
    big_instructions = "Follow the policy. " * 2_000  # ~9,500 tokens of instructions alone
    seen: list[int] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(len(messages))
        return ModelResponse(parts=[TextPart("ok")])

    events: list[ContextEvent] = []
    processor = SummarizationProcessor(None, trigger=("tokens", 9_000), keep=0, event_callback=events.append)
    agent = Agent(FunctionModel(model), instructions=big_instructions, capabilities=[processor])
    history = (await agent.run("first question")).all_messages()
    # The messages alone are tiny; only the instructions push the request over the trigger.
    result = await agent.run("second question", message_history=history)
    assert any(isinstance(e, CompactionCompleted) for e in events)
    assert len(summaries(result.all_messages())) == 1


async def test_second_compaction_rolls_the_previous_summary_forward() -> None:
    script = ScriptedAgentModel(tool_calls=14)
    summary_model = SummaryModel(text="ROLLING-SUMMARY-MARKER")
    processor = SummarizationProcessor(FunctionModel(summary_model), trigger=("messages", 8), keep=0)
    result = await make_agent(script, processor).run("Read all the data files.")
    assert len(summary_model.prompts) >= 2
    assert "ROLLING-SUMMARY-MARKER" not in summary_model.prompts[0]
    assert "ROLLING-SUMMARY-MARKER" in summary_model.prompts[1]
    assert len(summaries(result.all_messages())) == 1, "the new summary replaces the old one"


async def test_concurrent_runs_share_one_processor_without_cross_talk() -> None:
    processor = SummarizationProcessor(None, trigger=("messages", 7), keep=0)

    async def one_run(i: int) -> list[ModelMessage]:
        script = ScriptedAgentModel(tool_calls=6 + i % 3)
        result = await make_agent(script, processor).run(f"Run {i}: read the files.")
        return result.all_messages()

    histories = await asyncio.gather(*(one_run(i) for i in range(20)))
    for i, history in enumerate(histories):
        assert validate_history(history, for_request=False) == []
        (summary,) = summaries(history)
        assert isinstance(summary, ModelRequest)
        text = summary.parts[0].content  # type: ignore[union-attr]
        assert f"Run {i}:" in str(text)
        assert not any(f"Run {j}:" in str(text) for j in range(20) if j != i)


async def test_sliding_window_in_a_run_never_drops_the_system_prompt() -> None:
    script = ScriptedAgentModel(tool_calls=12)
    processor = SlidingWindowProcessor(trigger=("messages", 8), keep=3)
    agent = Agent(FunctionModel(script), system_prompt="SYSTEM-PROMPT", capabilities=[processor])

    @agent.tool_plain
    def read(path: str) -> str:
        return "x" * 100

    result = await agent.run("go")
    for seen in script.seen:
        assert validate_history(seen) == []
        assert "SYSTEM-PROMPT" in str(seen[0])
        assert len(seen) <= 9
    assert validate_history(result.all_messages(), for_request=False) == []


@pytest.mark.parametrize(
    "failure",
    ["raises", "empty", "timeout"],
)
async def test_failing_summarizer_falls_back_and_never_writes_error_text(failure: str) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if failure == "raises":
            raise RuntimeError("provider exploded: HTTP 500")
        if failure == "empty":
            return ModelResponse(parts=[TextPart("   ")])
        import time

        time.sleep(0.5)
        return ModelResponse(parts=[TextPart("too late")])

    async def async_broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if failure == "timeout":
            await asyncio.sleep(5)
        return broken(messages, info)

    events: list[ContextEvent] = []
    processor = SummarizationProcessor(
        FunctionModel(async_broken), trigger=("messages", 7), keep=0, summary_timeout=0.2, event_callback=events.append
    )
    script = ScriptedAgentModel(tool_calls=4)  # one trigger crossing
    result = await make_agent(script, processor).run("Read the data files.")
    (summary,) = summaries(result.all_messages())
    text = str(summary.parts[0].content)  # type: ignore[union-attr]
    assert "exploded" not in text and "too late" not in text and "HTTP 500" not in text
    assert "/data/file1.txt" in text  # the deterministic summary extracted the artifacts
    fallbacks = [e for e in events if type(e).__name__ == "SummarizerFallback"]
    assert len(fallbacks) == 1
    completed = [e for e in events if isinstance(e, CompactionCompleted)]
    assert completed and completed[0].fallback_reason is not None
    assert validate_history(result.all_messages(), for_request=False) == []


def _history_with_planted_fact(n: int) -> list[ModelMessage]:
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("PLANTED-FACT: the launch code is 7741.")])]
    for i in range(1, n):
        if i % 2:
            messages.append(ModelResponse(parts=[TextPart(f"answer {i} " + "lorem ipsum " * 20)]))
        else:
            messages.append(ModelRequest(parts=[UserPromptPart(f"question {i}")]))
    if isinstance(messages[-1], ModelResponse):
        messages.append(ModelRequest(parts=[UserPromptPart("final question")]))
    return messages


async def test_summarizer_receives_every_message_of_a_1000_message_span() -> None:
    summary_model = SummaryModel()
    from summarization_pydantic_ai import LLMSummarizer

    summarizer = LLMSummarizer(FunctionModel(summary_model), max_input_tokens=8_000)
    processor = SummarizationProcessor(summarizer, trigger=("messages", 500), keep=0)
    history = _history_with_planted_fact(1_001)
    result = await processor(history)
    seen = "\n".join(summary_model.prompts)
    assert "PLANTED-FACT: the launch code is 7741." in seen
    assert len(summary_model.prompts) > 1, "the span was chunked"
    for i in range(1, 1_000):
        assert f"--- message {i} ---" in seen, f"message {i} never reached the summarizer"
    assert len(result) == 2  # summary + the in-flight prompt
    assert validate_history(result) == []


async def test_user_text_with_braces_cannot_break_the_template() -> None:
    summary_model = SummaryModel()
    processor = SummarizationProcessor(FunctionModel(summary_model), trigger=("messages", 3), keep=0)
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("format {messages} and {previous_summary} and { broken")]),
        ModelResponse(parts=[TextPart("ok {focus} " + "The parser keeps every brace as it is. " * 20)]),
        ModelRequest(parts=[UserPromptPart("next {0} }")]),
    ]
    await processor(history)
    prompt = summary_model.prompts[0]
    assert "format {messages} and {previous_summary} and { broken" in prompt
    assert "ok {focus}" in prompt


@pytest.mark.parametrize(
    ("summary_text", "limit", "why"),
    [
        ("x " * 300_000, None, "more than"),  # a 300k-word "summary" of a few thousand tokens
        ("a perfectly short summary. " * 40, 50, "max_summary_tokens=50"),
    ],
    ids=["longer-than-the-span", "over-the-configured-maximum"],
)
async def test_a_summary_longer_than_allowed_is_refused_for_the_fallback(
    summary_text: str, limit: int | None, why: str
) -> None:
    from summarization_pydantic_ai import LLMSummarizer

    def bloated(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(summary_text)])

    events: list[ContextEvent] = []
    summarizer = LLMSummarizer(FunctionModel(bloated), max_summary_tokens=limit)
    processor = SummarizationProcessor(summarizer, trigger=("messages", 7), keep=0, event_callback=events.append)
    result = await make_agent(ScriptedAgentModel(tool_calls=4), processor).run("Read the data files.")
    (summary,) = summaries(result.all_messages())
    text = str(summary.parts[0].content)  # type: ignore[union-attr]
    assert summary_text.strip() not in text and "/data/file1.txt" in text  # the deterministic summary
    completed = [e for e in events if isinstance(e, CompactionCompleted)]
    assert completed and why in (completed[0].fallback_reason or "")
    assert validate_history(result.all_messages(), for_request=False) == []


def test_max_summary_tokens_must_be_positive() -> None:
    from summarization_pydantic_ai import LLMSummarizer

    with pytest.raises(ValueError, match="max_summary_tokens"):
        LLMSummarizer("test", max_summary_tokens=0)
