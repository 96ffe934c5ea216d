"""Issue 23, scope 3: a compaction never grows the working context, and a long latest request is stored once."""

from __future__ import annotations

from typing import Any

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

from summarization_pydantic_ai import (
    DEFAULT_REQUIRED_SECTIONS,
    CompactionCompleted,
    CompactionSkipped,
    ContextEvent,
    ContextManagerMiddleware,
    SummarizationProcessor,
    SummaryRequest,
    count_tokens_approximately,
    render_messages,
    summary_info,
    summary_part,
    validate_history,
)
from summarization_pydantic_ai._compaction import NOT_SMALLER
from summarization_pydantic_ai.summarize._validate import complete_summary

DOC = "SKILL DOCUMENT\n" + "\n".join(f"step {i}: " + "use the citation API carefully " * 6 for i in range(100))


def user(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text)])


def calls(*items: tuple[str, dict[str, Any], str]) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=call_id) for name, args, call_id in items])


def returns(*items: tuple[str, str, str]) -> ModelRequest:
    return ModelRequest(parts=[ToolReturnPart(name, content, tool_call_id=call_id) for name, content, call_id in items])


def skill_history() -> list[ModelMessage]:
    """The issue's reproduction: a skill document delivered as user text beside a tool result, then web fetches."""
    history: list[ModelMessage] = [
        user("Check the citations in refs.bib"),
        calls(("Skill", {"name": "cite"}, "s1")),
        ModelRequest(parts=[ToolReturnPart("Skill", "loaded", tool_call_id="s1"), UserPromptPart(DOC)]),
    ]
    for i in range(12):
        history += [
            calls(("WebFetch", {"url": f"https://doi.org/{i}"}, f"w{i}")),
            returns(("WebFetch", "x" * 800, f"w{i}")),
        ]
    return history


def copies_of_the_document(messages: list[ModelMessage]) -> int:
    return render_messages(messages).count("step 57: use the citation API")


async def test_the_reproduction_ends_with_fewer_tokens_and_the_document_once() -> None:
    history = skill_history()
    out = await SummarizationProcessor(model=None, trigger=("messages", 10), keep=("messages", 6))(history)
    assert count_tokens_approximately(out) < count_tokens_approximately(history)
    assert copies_of_the_document(out) == 1
    summary = next(p for m in out if (p := summary_part(m)) is not None)
    # The document came with the Skill tool's result: the user's request is the prompt before it, named verbatim.
    assert str(summary.content).endswith("## Latest user request\nCheck the citations in refs.bib")
    assert validate_history(out) == []


async def test_the_middleware_stores_the_long_request_once_too() -> None:
    history = skill_history()
    middleware = ContextManagerMiddleware(max_tokens=200_000, keep=("messages", 6), summarization_model=None)
    out = await middleware.compact(history)
    assert len(out) < len(history) and count_tokens_approximately(out) < count_tokens_approximately(history)
    assert copies_of_the_document(out) == 1


def test_the_summary_check_never_appends_a_second_copy() -> None:
    reference = "## Latest user request\n(kept verbatim in the conversation after this summary: ...)"
    text = "\n".join(f"## {title}\nnone" for title in DEFAULT_REQUIRED_SECTIONS) + "\n" + reference
    # The compaction paths ask for the long request only when it is not kept verbatim beside the summary.
    assert complete_summary(text, required_sections=DEFAULT_REQUIRED_SECTIONS, latest_request=None, paths=[]) == text


class Copying:
    """A summarizer that copies the whole span into its summary (a model that paraphrases at length)."""

    name = "copying"

    def __init__(self) -> None:
        self.calls = 0

    async def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        sections = "\n".join(f"## {title}\n{render_messages(request.messages)}" for title in DEFAULT_REQUIRED_SECTIONS)
        return f"{sections}\n## Latest user request\n{request.latest_user_request}"


async def test_a_model_summary_larger_than_what_it_replaces_is_not_committed() -> None:
    events: list[ContextEvent] = []
    summarizer = Copying()
    processor = SummarizationProcessor(summarizer, trigger=None, keep=("messages", 6), event_callback=events.append)
    history = skill_history()
    out = await processor.compact(history)
    assert summarizer.calls == 2  # refused, asked once more, refused again
    info = summary_info(next(m for m in out if summary_info(m)))
    assert info is not None and info["summarizer"] == "deterministic"
    assert "more than the" in info["fallback_reason"]
    assert count_tokens_approximately(out) < count_tokens_approximately(history)
    assert [type(e) for e in events if isinstance(e, CompactionCompleted)] == [CompactionCompleted]


@pytest.mark.parametrize("form", ["processor", "middleware"])
async def test_a_compaction_that_cannot_make_the_history_smaller_leaves_it_as_it_was(form: str) -> None:
    history: list[ModelMessage] = [user("Hi"), ModelResponse(parts=[TextPart("Hello!")]), user("Thanks")]
    events: list[ContextEvent] = []
    if form == "processor":
        out = await SummarizationProcessor(None, trigger=None, keep=1, event_callback=events.append).compact(history)
    else:
        middleware = ContextManagerMiddleware(
            max_tokens=1_000, keep=1, summarization_model=None, event_callback=events.append
        )
        out = await middleware.compact(history)
    assert out == history
    assert [e.reason for e in events if isinstance(e, CompactionSkipped)] == [NOT_SMALLER]
    assert not [e for e in events if isinstance(e, CompactionCompleted)]


async def test_through_agent_run_the_request_after_the_compaction_is_smaller_and_holds_the_document_once() -> None:
    sent: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(messages)
        if len(sent) <= 14:
            return ModelResponse(parts=[ToolCallPart("WebFetch", {"url": f"https://doi.org/{len(sent)}"})])
        return ModelResponse(parts=[TextPart("All citations resolve.")])

    processor = SummarizationProcessor(None, trigger=("messages", 20), keep=("messages", 6))
    agent = Agent(FunctionModel(model), capabilities=[processor])

    @agent.tool_plain(name="WebFetch")
    def web_fetch(url: str) -> str:
        return f"{url}: " + "x" * 800

    # The run continues from the request that delivered the document: it is the latest user request.
    result = await agent.run(message_history=skill_history()[:3])
    assert result.output == "All citations resolve."
    sizes = [count_tokens_approximately(m) for m in sent]
    dropped = next(i for i in range(1, len(sizes)) if sizes[i] < sizes[i - 1])  # the compaction
    assert all(copies_of_the_document(m) == 1 for m in sent[dropped:])
    assert validate_history(result.all_messages(), for_request=False) == []


async def test_a_model_summarizer_is_given_the_users_request_and_the_document_at_most_once() -> None:
    prompts: list[str] = []

    def summary_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = str(messages[-1].parts[-1].content)
        prompts.append(prompt)
        latest = prompt.split("<latest_user_request>\n")[1].split("\n</latest_user_request>", maxsplit=1)[0]
        body = "\n".join(f"## {title}\nfetched {len(prompt)} characters" for title in DEFAULT_REQUIRED_SECTIONS)
        return ModelResponse(parts=[TextPart(f"{body}\n## Latest user request\n{latest}")])

    processor = SummarizationProcessor(FunctionModel(summary_model), trigger=None, keep=("messages", 6))
    history = skill_history()
    out = await processor.compact(history)
    assert prompts and all(prompt.count("step 57: use the citation API") <= 1 for prompt in prompts)
    request = "<latest_user_request>\nCheck the citations in refs.bib\n</latest_user_request>"
    assert all(request in prompt for prompt in prompts), "the user's request, not the document the tool delivered"
    info = summary_info(next(m for m in out if summary_info(m)))
    assert info is not None and info["summarizer"] == "llm" and "fallback_reason" not in info
    assert copies_of_the_document(out) == 1
