"""A document a tool delivers as user text beside its result (`ToolReturn(content=...)`, a skill's text, a fetched
page) is not the user's latest request; a new run's prompt placed after the results it resumes with is.

Both shapes are one request of tool results and a user prompt; what tells them apart is whether the request opens
a new run (pydantic-ai gives each run its own `run_id`).
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import SummarizationProcessor, summary_part
from summarization_pydantic_ai.summarize import latest_user_request

DOC = "SKILL DOCUMENT\n" + "\n".join(f"step {i}: use the citation API carefully" for i in range(300))


def _fetched(run_id: str | None, prompt_run: str | None) -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart("Check the citations in refs.bib")], run_id=run_id),
        ModelResponse(parts=[ToolCallPart("Skill", {"name": "cite"}, tool_call_id="s1")], run_id=run_id),
        ModelRequest(
            parts=[ToolReturnPart("Skill", "loaded", tool_call_id="s1"), UserPromptPart(DOC)], run_id=prompt_run
        ),
    ]


def test_a_document_beside_a_tool_result_is_not_the_latest_request() -> None:
    assert latest_user_request(_fetched("run-1", "run-1")) == "Check the citations in refs.bib"
    assert latest_user_request(_fetched(None, None)) == "Check the citations in refs.bib"  # imported, no run ids


def test_a_new_runs_prompt_after_resumed_results_is_the_latest_request() -> None:
    messages = _fetched("run-1", "run-2")
    messages[-1] = ModelRequest(
        parts=[ToolReturnPart("Skill", "approved", tool_call_id="s1"), UserPromptPart("Now fix the two bad ones")],
        run_id="run-2",
    )
    assert latest_user_request(messages) == "Now fix the two bad ones"


async def test_a_compaction_through_agent_run_keeps_the_users_request_not_the_document() -> None:
    """A tool returns its document as user text (pydantic-ai's `ToolReturn.content`); the compaction that the
    documents trigger names the user's request in the summary, not a document."""
    requests: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(messages)
        if len(requests) <= 6:
            call = ToolCallPart("fetch", {"url": f"https://doi.org/{len(requests)}"}, tool_call_id=f"f{len(requests)}")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(
        FunctionModel(model),
        capabilities=[SummarizationProcessor(None, trigger=("tokens", 6_000), keep=("messages", 4))],
    )

    @agent.tool_plain
    def fetch(url: str) -> ToolReturn:  # pyright: ignore[reportUnusedFunction]
        """Fetch a page."""
        return ToolReturn(return_value=f"fetched {url}", content=DOC)

    await agent.run("Check the citations in refs.bib")
    summaries = [p for m in requests[-1] if (p := summary_part(m)) is not None]
    assert summaries, "the documents made the history compact"
    # The summary names the user's request verbatim, not the document the tool delivered beside its result.
    assert str(summaries[0].content).endswith("## Latest user request\nCheck the citations in refs.bib")
