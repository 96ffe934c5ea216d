"""`RecordingModel`: a scripted `FunctionModel` that records every request it receives, as it received it.

A scripted session (the browser session, the harness's coding session) plans its responses; this model keeps,
for each request, the messages it was sent (a deep copy: nothing a later step does to the history can change
the record), the instructions and tool definitions, and a timestamp from a virtual clock, so a benchmark can
price the requests with a prefix cache. Summary requests are answered with a well-formed summary (the sections
the context manager requires and the latest user request, verbatim) and counted apart from the session's turns.
It knows no tool names: the planner decides the calls.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RequestUsage

from .._tokens import count_tokens_approximately, estimate_text_tokens
from ..cache import SentRequest

__all__ = [
    "Planner",
    "RecordedRequest",
    "RecordingModel",
    "SummaryWriter",
    "is_summary_request",
    "request_overhead",
    "scripted_summary",
]

Planner = Callable[[list[ModelMessage], AgentInfo], ModelResponse]
"""The session's side: the messages of a (non-summary) request and the agent info in, the response out."""
SummaryWriter = Callable[[Sequence[ModelMessage]], str]
"""Writes the summary a summary request asks for, from that request's messages."""

_SUMMARY_MARKERS = ("write a summary of the conversation", "Summarize the conversation span below")
_SECTIONS = ("Intent", "Decisions", "Artifacts", "Errors", "Current state", "Next steps")
_EPOCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the model received."""

    index: int
    """Its position among every request the model received (turns and summaries)."""
    turn: int | None
    """The session turn (0-based), or `None` for a summary request."""
    messages: list[ModelMessage]
    """The messages it was sent (after every processor and the middleware), copied when received; a message
    equal to the previous record's at the same position is that record's object."""
    instructions: str | None
    tool_definitions: list[ToolDefinition]
    timestamp: datetime
    """On the model's virtual clock (see `RecordingModel.seconds_per_request` and `pause`)."""
    tokens: int
    """Estimated tokens of its messages plus its instructions and tool definitions."""
    output_tokens: int
    """Estimated tokens of the response the model gave."""

    @property
    def is_summary(self) -> bool:
        return self.turn is None

    def sent_request(self, model_name: str | None = None) -> SentRequest:
        """The request as a prompt cache sees it, for `CacheSimulator` (`model_name`: informational)."""
        return SentRequest(
            self.messages,
            instructions=self.instructions or "",
            tool_definitions=self.tool_definitions,
            timestamp=self.timestamp,
            output_tokens=self.output_tokens,
            model_name=model_name,
        )


@dataclass
class RecordingModel:
    """A scripted model that records every request it receives.

    Example:
        ```python
        recorder = RecordingModel(lambda messages, info: ModelResponse(parts=[TextPart('done')]))
        agent = Agent(recorder.model())
        agent.run_sync('hello')
        assert recorder.requests[0].messages[-1].parts[0].content == 'hello'
        ```
    """

    planner: Planner
    summarize: SummaryWriter | None = None
    """Writes summaries (default: `scripted_summary`)."""
    name: str = "scripted"
    start: datetime = _EPOCH
    seconds_per_request: float = 6.0
    """Virtual seconds between two requests (a model answering and its tools running)."""
    requests: list[RecordedRequest] = field(default_factory=list[RecordedRequest], init=False)
    _elapsed: float = field(default=0.0, init=False, repr=False)

    def model(self) -> FunctionModel:
        return FunctionModel(self._respond, model_name=self.name)

    def pause(self, seconds: float) -> None:
        """Advance the virtual clock (a user reading the answer before the next prompt)."""
        if seconds < 0:
            raise ValueError(f"seconds must be 0 or more, got {seconds}")
        self._elapsed += seconds

    @property
    def turn_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.turn is not None]

    @property
    def summary_requests(self) -> int:
        """Requests asking the model for a summary (an LLM call a zero-LLM strategy never makes)."""
        return sum(1 for r in self.requests if r.turn is None)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tokens = count_tokens_approximately(messages) + request_overhead(info)
        received = self._copy(messages)
        summary = is_summary_request(messages)
        turn = None if summary else len(self.requests) - self.summary_requests
        if summary:
            response = ModelResponse(parts=[TextPart((self.summarize or scripted_summary)(messages))])
        else:
            response = self.planner(messages, info)
        output = count_tokens_approximately([response])
        self.requests.append(
            RecordedRequest(
                index=len(self.requests),
                turn=turn,
                messages=received,
                instructions=info.instructions,
                tool_definitions=list(info.function_tools),
                timestamp=self.start + timedelta(seconds=self._elapsed),
                tokens=tokens,
                output_tokens=output,
            )
        )
        self._elapsed += self.seconds_per_request
        return replace(response, usage=RequestUsage(input_tokens=tokens, output_tokens=output))

    def _copy(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The messages as they are now. A message equal to the one at its position in the previous record is
        recorded as that same object (consumers such as `CacheSimulator` compare consecutive histories by
        identity first); the others are deep-copied, so nothing done to the run's history later changes them."""
        previous = self.requests[-1].messages if self.requests else []
        return [
            previous[i] if i < len(previous) and previous[i] == message else copy.deepcopy(message)
            for i, message in enumerate(messages)
        ]


def request_overhead(info: AgentInfo) -> int:
    """Estimated tokens of a request's instructions and tool definitions."""
    total = estimate_text_tokens(info.instructions or "")
    for tool in info.function_tools:
        schema = json.dumps(tool.parameters_json_schema, separators=(",", ":"))
        total += 10 + estimate_text_tokens(tool.name + (tool.description or "") + schema)
    return total


def _prompt_text(messages: Sequence[ModelMessage]) -> str:
    last = messages[-1] if messages else None
    if not isinstance(last, ModelRequest):
        return ""
    return " ".join(p.content for p in last.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str))


def is_summary_request(messages: Sequence[ModelMessage]) -> bool:
    """Whether the last request asks for a summary (either summary prompt of the context manager)."""
    text = _prompt_text(messages)
    return any(marker in text for marker in _SUMMARY_MARKERS)


def scripted_summary(
    messages: Sequence[ModelMessage], *, default: str = "The session so far.", sections: Mapping[str, str] | None = None
) -> str:
    """A well-formed summary: every required section (its text from `sections`, else `default`) and the latest
    user request, verbatim (as the summary prompt quotes it)."""
    prompt = _prompt_text(messages)
    latest = prompt.rsplit("<latest_user_request>\n", 1)[-1].split("\n</latest_user_request>", maxsplit=1)[0]
    body = "\n".join(f"## {title}\n{(sections or {}).get(title, default)}" for title in _SECTIONS)
    return f"{body}\n## Latest user request\n{latest}"
