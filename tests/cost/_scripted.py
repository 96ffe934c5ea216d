"""A scripted agent with fixed usage per request and a model name genai-prices knows, for the cost tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from genai_prices import calc_price
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

AGENT_USAGE = RequestUsage(input_tokens=12_000, cache_read_tokens=4_000, cache_write_tokens=0, output_tokens=800)
SUMMARY_USAGE = RequestUsage(input_tokens=9_000, output_tokens=1_500)
SUMMARY = (
    "## Intent\n- read the files\n## Decisions\n- none\n## Artifacts\n- /src\n## Errors\n- none\n"
    "## Current state\n- reading\n## Next steps\n- answer\n"
)


def hand_price(usage: RequestUsage, model: str) -> Decimal:
    return calc_price(usage, model, provider_id="openai").total_price


@dataclass
class Reader:
    """Reads one file per prompt, then answers; every response carries `usage`."""

    usage: RequestUsage = field(default_factory=lambda: AGENT_USAGE)
    reads: int = 1
    """Files read per prompt (one request each) before the answer."""
    calls: int = 0
    seen: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    _read: int = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        self.seen.append(list(messages))
        if any(isinstance(p, UserPromptPart) and not str(p.content).startswith("<system>") for p in messages[-1].parts):
            self._read = 0  # a new prompt (pydantic-ai sends a later system prompt as a user part in <system>)
        if self._read < self.reads:
            self._read += 1
            call = ToolCallPart("read", {"path": f"/src/f{self.calls}.py"}, tool_call_id=f"call{self.calls}")
            return ModelResponse(parts=[call], usage=self.usage)
        return ModelResponse(parts=[TextPart(f"done after {len(messages)} messages")], usage=self.usage)


@dataclass
class SummaryModel:
    """A summarizer model: a valid summary, fixed usage."""

    usage: RequestUsage = field(default_factory=lambda: SUMMARY_USAGE)
    calls: int = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        latest = ""
        for message in messages:
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    latest = part.content
        return ModelResponse(parts=[TextPart(SUMMARY + f"\n{latest[-2000:]}")], usage=self.usage)


def make_agent(reader: Reader, capabilities: list[Any], model_name: str = "gpt-4o") -> Agent[Any, str]:
    agent: Agent[Any, str] = Agent(FunctionModel(reader, model_name=model_name), capabilities=capabilities)

    @agent.tool_plain
    def read(path: str) -> str:
        return f"# {path}\n" + "def f():\n    return 42\n" * 80

    return agent


async def read_files(
    agent: Agent[Any, str], runs: int, history: list[ModelMessage] | None = None
) -> list[ModelMessage]:
    """`runs` runs of `agent` ("read file 0", "read file 1", ...), each continuing the history of the one before."""
    messages = list(history or [])
    for i in range(runs):
        messages = (await agent.run(f"read file {i}", message_history=messages)).all_messages()
    return messages
