"""End-to-end (issue 10, scope 2): the default summarizer is the run's own model, its summary request reuses the
run's request as a cacheable prefix, and when no model can be called the fallback warns once per middleware."""

from __future__ import annotations

import copy
import dataclasses
import logging
from dataclasses import dataclass, field

import pytest
from pydantic_ai import Agent
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
from pydantic_ai.tools import ToolDefinition

from summarization_pydantic_ai import (
    RUN_MODEL,
    ContextEvent,
    ContextManagerMiddleware,
    SummarizationProcessor,
    SummarizerFallback,
    summary_info,
    summary_part,
    validate_history,
)

SUMMARY_MARK = "Pause the task: write a summary"


def is_summary_request(messages: list[ModelMessage]) -> bool:
    last = messages[-1]
    return isinstance(last, ModelRequest) and any(
        isinstance(p, UserPromptPart) and SUMMARY_MARK in str(p.content) for p in last.parts
    )


def latest_prompt(messages: list[ModelMessage]) -> str:
    prompts = [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart) and SUMMARY_MARK not in str(p.content)
    ]
    return prompts[-1]


def summary_text(latest: str) -> str:
    sections = ["Intent", "Decisions", "Artifacts", "Errors", "Current state", "Next steps"]
    body = "\n".join(f"## {title}\nwritten by the run's model" for title in sections)
    return f"{body}\n## Latest user request\n{latest}"


@dataclass
class Call:
    messages: list[ModelMessage]
    tools: list[ToolDefinition]
    instructions: str | None
    summary: bool


@dataclass
class AgentModel:
    """The agent's model: reads a file per question, answers, and writes summaries when asked."""

    calls: list[Call] = field(default_factory=list[Call])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        summary = is_summary_request(messages)
        # Deep copies: the run later adds message ids to these very objects.
        self.calls.append(Call(copy.deepcopy(messages), list(info.function_tools), info.instructions, summary))
        if summary:
            return ModelResponse(parts=[TextPart(summary_text(latest_prompt(messages)))])
        if any(isinstance(p, UserPromptPart) for p in messages[-1].parts):
            return ModelResponse(parts=[ToolCallPart("read_file", {"path": f"src/module_{len(self.calls)}.py"})])
        return ModelResponse(parts=[TextPart("The module sets x = 1.")])


def make_agent(model: AgentModel, middleware: ContextManagerMiddleware) -> Agent[None, str]:
    agent = Agent(FunctionModel(model), instructions="You answer questions about code.", capabilities=[middleware])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return f"# {path}\n" + "x = 1\n" * 150

    return agent


def without_metadata(messages: list[ModelMessage]) -> list[ModelMessage]:
    """The messages as a provider receives them (message ids live in metadata, which is never sent)."""
    return [dataclasses.replace(m, metadata=None) for m in messages]


async def test_default_summarizer_is_the_run_model_and_its_request_starts_with_the_live_request() -> None:
    model = AgentModel()
    middleware = ContextManagerMiddleware(max_tokens=1_200)
    assert middleware.summarization_model is RUN_MODEL
    agent = make_agent(model, middleware)
    history: list[ModelMessage] | None = None
    for i in range(5):
        history = (await agent.run(f"Question {i}: what does the module set?", message_history=history)).all_messages()
    assert history is not None

    summary_calls = [i for i, call in enumerate(model.calls) if call.summary]
    assert summary_calls and middleware.compression_count == len(summary_calls)
    for index in summary_calls:
        live, summary = model.calls[index - 1], model.calls[index]
        assert not live.summary
        # The summary request sends the last live request's messages, tool definitions and instructions
        # unchanged, and appends one user request.
        assert without_metadata(summary.messages[: len(live.messages)]) == without_metadata(live.messages)
        assert summary.tools == live.tools and summary.tools
        assert summary.instructions == live.instructions == "You answer questions about code."
        assert len(summary.messages) > len(live.messages)
        assert isinstance(summary.messages[-1], ModelRequest) and len(summary.messages[-1].parts) == 1

    summaries = [m for m in history if summary_part(m) is not None]
    info = summary_info(summaries[-1])
    assert info is not None and info["summarizer"] == "llm" and "fallback_reason" not in info
    assert "written by the run's model" in str(summary_part(summaries[-1]).content)  # type: ignore[union-attr]
    assert validate_history(history, for_request=False) == []


async def test_the_summary_request_starts_with_what_the_provider_was_last_sent() -> None:
    """pydantic-ai sends a history prepared (tool results in call order, consecutive requests merged); the summary
    request is prepared the same way, so its prefix is the previous request's, byte for byte (a cache read), not
    the stored order (a re-write of the whole conversation from the first out-of-order result)."""
    model = AgentModel()
    middleware = ContextManagerMiddleware(max_tokens=1_000_000)
    agent = make_agent(model, middleware)
    # An imported exchange: two parallel calls whose results were stored in the order they finished, and no
    # answer after them (the next prompt joins their request when sent).
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Look around.")]),
        ModelResponse(
            parts=[
                ToolCallPart("read_file", {"path": "a.py"}, tool_call_id="first"),
                ToolCallPart("read_file", {"path": "b.py"}, tool_call_id="second"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("read_file", "b = 2", tool_call_id="second"),
                ToolReturnPart("read_file", "a = 1", tool_call_id="first"),
            ]
        ),
    ]
    history = (await agent.run("Question 1: what does the module set?", message_history=history)).all_messages()
    middleware.request_compact()
    await agent.run("Question 2: and now?", message_history=history)

    summary_at = next(i for i, call in enumerate(model.calls) if call.summary)
    live, summary = model.calls[summary_at - 1], model.calls[summary_at]
    sent = without_metadata(live.messages)
    returns = [p.tool_call_id for p in sent[2].parts if isinstance(p, ToolReturnPart)]
    assert returns == ["first", "second"]  # as pydantic-ai sent them: call order, the prompt merged in
    assert without_metadata(summary.messages[: len(live.messages)]) == sent


async def test_an_unreachable_summary_model_warns_once_over_ten_compactions(caplog: pytest.LogCaptureFixture) -> None:
    def unreachable(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ConnectionError("offline")

    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(
        max_tokens=1_000_000, summarization_model=FunctionModel(unreachable), event_callback=events.append
    )
    history = [ModelRequest(parts=[UserPromptPart("Start: read src/app.py")])]
    with caplog.at_level(logging.WARNING, logger="summarization_pydantic_ai"):
        for i in range(10):
            history = await middleware.compact(
                [
                    *history,
                    ModelResponse(parts=[TextPart(f"step {i}: " + "I read the module and updated the parser. " * 20)]),
                    ModelRequest(parts=[UserPromptPart(f"go {i}")]),
                ]
            )
            part = summary_part(history[0])
            assert part is not None and f"go {i}" in str(part.content)
            assert (summary_info(history[0]) or {})["summarizer"] == "deterministic"
    fallbacks = [e for e in events if isinstance(e, SummarizerFallback)]
    assert len(fallbacks) == 10 and all("offline" in e.error for e in fallbacks)
    warnings = [r for r in caplog.records if "using the deterministic summary" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


async def test_a_named_model_without_its_package_or_key_builds_offline_and_falls_back_when_used() -> None:
    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(summarization_model="openai:gpt-4.1-mini", event_callback=events.append)
    history = [
        ModelRequest(parts=[UserPromptPart("Fix src/app.py")]),
        ModelResponse(parts=[TextPart("Fixed: the handler checks for None before it retries. " * 10)]),
        ModelRequest(parts=[UserPromptPart("Thanks")]),
    ]
    result = await middleware.compact(history)
    assert (summary_info(result[0]) or {})["summarizer"] == "deterministic"
    assert [type(e) for e in events if isinstance(e, SummarizerFallback)] == [SummarizerFallback]


@pytest.mark.parametrize("name", ["acme:model-x", "gpt-4o", "nonsense", ":gpt-4o", "openai:"])
def test_an_unresolvable_model_name_is_refused_at_construction(name: str) -> None:
    with pytest.raises(ValueError, match="cannot resolve the summarization model"):
        ContextManagerMiddleware(summarization_model=name)
    with pytest.raises(ValueError, match="cannot resolve the summarization model"):
        SummarizationProcessor(name)


async def test_outside_a_run_the_default_uses_model_name_or_falls_back() -> None:
    history = [
        ModelRequest(parts=[UserPromptPart("Plan the release")]),
        ModelResponse(parts=[TextPart("Done: the release is planned for Monday, after the freeze. " * 10)]),
        ModelRequest(parts=[UserPromptPart("Ship it")]),
    ]
    processor = SummarizationProcessor(trigger=None, keep=1)
    assert processor.model is RUN_MODEL
    result = await processor.compact(history)
    info = summary_info(result[0]) or {}
    assert info["summarizer"] == "deterministic" and "outside an agent run" in info["fallback_reason"]

    # With `model_name`, that model writes it (pydantic-ai's TestModel answers without the sections: refused).
    result = await SummarizationProcessor(trigger=None, keep=1, model_name="test").compact(history)
    info = summary_info(result[0]) or {}
    assert info["summarizer"] == "deterministic" and "summary refused" in info["fallback_reason"]
