"""The tool-pair index, history validation and summary recognition.

Everything that cuts or rewrites a history is built on [`ToolPairIndex`][summarization_pydantic_ai.ToolPairIndex]:
one O(n) pass that maps every `tool_call_id` to the message holding its call and the messages holding its
return(s), so a cutoff can be moved to keep a call and its result together without scanning a window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = [
    "MESSAGE_ID_KEY",
    "SUMMARY_METADATA_KEY",
    "HistoryProblem",
    "ProblemKind",
    "ToolPairIndex",
    "get_message_id",
    "is_summary_message",
    "summary_info",
    "summary_part",
    "user_prompts",
    "validate_history",
]

MESSAGE_ID_KEY = "summarization_pydantic_ai.message_id"
"""The key under which a message's stable id is kept in `ModelRequest.metadata` / `ModelResponse.metadata`."""

SUMMARY_METADATA_KEY = "summarization_pydantic_ai.summary"
"""The key of a summary's provenance (covered ids, summarizer, fallback) in `CompactionPart.metadata`."""

ProblemKind = Literal[
    "orphan_call",
    "orphan_return",
    "duplicate_return",
    "split_results",
    "results_after_text",
    "ends_with_response",
    "empty_request",
    "assistant_first",
    "summary_only",
    "empty_history",
]


@dataclass(frozen=True)
class HistoryProblem:
    """One rule of a strict provider that a history breaks."""

    kind: ProblemKind
    message_index: int
    detail: str
    tool_call_id: str | None = None

    def __str__(self) -> str:
        return f"{self.kind} at message {self.message_index}: {self.detail}"


def _is_tool_call(part: object) -> bool:
    return isinstance(part, ToolCallPart)


def _is_tool_result(part: object) -> bool:
    """A request part that answers a function tool call: a tool return of any outcome, or a legacy retry prompt."""
    if isinstance(part, ToolReturnPart):
        return True
    return isinstance(part, RetryPromptPart) and part.tool_name is not None  # pyright: ignore[reportDeprecated]


def _result_call_id(part: Any) -> str:
    return str(part.tool_call_id)


@dataclass
class ToolPairIndex:
    """Where every tool call and its results live, built in one pass.

    `calls` maps a `tool_call_id` to the index of the `ModelResponse` holding the call; `results` maps it to the
    indices of the `ModelRequest`s holding a `ToolReturnPart` (any `outcome`: success, failed, retried,
    interrupted, denied) or a legacy `RetryPromptPart` for it. Native (provider-executed) calls and returns live
    in the same response and are indexed in `native_calls` / `native_results`.

    Example:
        ```python
        index = ToolPairIndex.build(messages)
        index.calls['call_1']  # -> 3
        index.results['call_1']  # -> [4]
        ```
    """

    calls: dict[str, int] = field(default_factory=dict[str, int])
    results: dict[str, list[int]] = field(default_factory=dict[str, list[int]])
    native_calls: dict[str, int] = field(default_factory=dict[str, int])
    native_results: dict[str, list[int]] = field(default_factory=dict[str, list[int]])
    earliest_call_for_message: list[int] = field(default_factory=list[int])
    """For each message, the smallest message index holding a call answered in it (its own index if none)."""

    @classmethod
    def build(cls, messages: Sequence[ModelMessage]) -> ToolPairIndex:
        index = cls()
        for i, message in enumerate(messages):
            earliest = i
            if isinstance(message, ModelResponse):
                for part in message.parts:
                    if isinstance(part, NativeToolCallPart):
                        index.native_calls.setdefault(part.tool_call_id, i)
                    elif isinstance(part, NativeToolReturnPart):
                        index.native_results.setdefault(part.tool_call_id, []).append(i)
                    elif _is_tool_call(part):
                        index.calls.setdefault(part.tool_call_id, i)  # type: ignore[union-attr]
            else:
                for part in message.parts:
                    if _is_tool_result(part):
                        call_id = _result_call_id(part)
                        index.results.setdefault(call_id, []).append(i)
                        call_at = index.calls.get(call_id)
                        if call_at is not None and call_at < earliest:
                            earliest = call_at
            index.earliest_call_for_message.append(earliest)
        return index

    def pending_call_ids(self) -> list[str]:
        """Calls that have no result anywhere in the history."""
        return [call_id for call_id in self.calls if call_id not in self.results]


def get_message_id(message: ModelMessage) -> str | None:
    """The stable id recorded in a message's metadata under `MESSAGE_ID_KEY`, if any."""
    metadata = message.metadata
    if not metadata:
        return None
    value = metadata.get(MESSAGE_ID_KEY)
    return value if isinstance(value, str) else None


def summary_part(message: ModelMessage) -> CompactionPart | None:
    """The application-written summary part of a request, if it has one (provider compactions are not ours)."""
    if not isinstance(message, ModelRequest):
        return None
    for part in message.parts:
        if isinstance(part, CompactionPart) and part.provider_name is None:
            return part
    return None


def summary_info(message: ModelMessage) -> dict[str, Any] | None:
    """The provenance this library records on a summary (covered ids, summarizer, `created_at`), if any."""
    part = summary_part(message)
    info = (part.metadata or {}).get(SUMMARY_METADATA_KEY) if part is not None else None
    return info if isinstance(info, dict) else None  # pyright: ignore[reportUnknownVariableType]


def is_summary_message(message: ModelMessage) -> bool:
    """Whether `message` is a request carrying a summary written by an application (ours or another library's)."""
    return summary_part(message) is not None


def user_prompts(messages: Sequence[ModelMessage], index: int) -> list[UserPromptPart]:
    """The user prompts of the request at `index` that are the user's own words.

    A request of prompts (system prompts and summaries aside) is the user's. Beside tool results, a prompt is the
    user's only when that request opens a new run (pydantic-ai puts a run's prompt after the results it resumes
    with: the request's `run_id` differs from the response's before it); otherwise it is content a tool delivered
    (`ToolReturn.content`: a fetched document, a skill's text, a file), which an agent sends as user text beside the
    tool's result and which is not what the user asked.
    """
    message = messages[index]
    if not isinstance(message, ModelRequest):
        return []
    prompts = [p for p in message.parts if isinstance(p, UserPromptPart)]
    results = (ToolReturnPart, RetryPromptPart)  # pyright: ignore[reportDeprecated]
    if not prompts or not any(isinstance(p, results) for p in message.parts):
        return prompts
    previous = messages[index - 1] if index > 0 else None
    opens_run = (
        isinstance(previous, ModelResponse)
        and message.run_id is not None
        and previous.run_id is not None
        and message.run_id != previous.run_id
    )
    return prompts if opens_run else []


def has_user_voice(message: ModelRequest) -> bool:
    """Whether a request carries something other than system prompts and summaries (a user turn, a tool result)."""
    return any(not isinstance(p, SystemPromptPart | CompactionPart) for p in message.parts)


def validate_history(messages: Sequence[ModelMessage], *, for_request: bool = True) -> list[HistoryProblem]:
    """Report every rule a strict provider (Anthropic, OpenAI chat) enforces that `messages` breaks.

    Rules: every tool call is answered in the requests right after its response (`orphan_call`); every tool
    result answers a call of the response right before it (`orphan_return`), once (`duplicate_return`); all the
    results of one response are in the one request right after it (`split_results`: Anthropic wants every
    `tool_result` in the next user message, Google every function response in the next turn), before any other
    user-voice part of that request (`results_after_text`: Anthropic wants the results first, OpenAI chat wants
    the tool messages right after the assistant message, before any user message); no empty
    request (`empty_request`); no assistant message before the first user-voice request, system prompts aside
    (`assistant_first`); a history that holds summaries but no user turn or tool exchange is `summary_only`.
    With `for_request=True` (a history about to be sent) the last message must be a `ModelRequest`
    (`ends_with_response`) and calls left unanswered in the last response are reported; a finished run's
    `all_messages()` is checked with `for_request=False`.

    Returns:
        The problems found, in message order; an empty list means the history is valid.
    """
    problems: list[HistoryProblem] = []
    if not messages:
        if for_request:
            problems.append(HistoryProblem("empty_history", 0, "a request needs at least one message"))
        return problems
    _check_order(messages, problems)
    _check_pairs(messages, for_request, problems)
    if for_request and isinstance(messages[-1], ModelResponse):
        problems.append(HistoryProblem("ends_with_response", len(messages) - 1, "the last message is a ModelResponse"))
    problems.sort(key=lambda p: p.message_index)
    return problems


def _check_order(messages: Sequence[ModelMessage], problems: list[HistoryProblem]) -> None:
    seen_user_voice = False
    seen_summary = False
    for i, message in enumerate(messages):
        if isinstance(message, ModelRequest):
            if not message.parts:
                problems.append(HistoryProblem("empty_request", i, "a ModelRequest with no parts"))
            seen_summary = seen_summary or is_summary_message(message)
            if has_user_voice(message):
                seen_user_voice = True
            elif is_summary_message(message):
                # A summary is sent as user-voice text, so it opens the conversation for the assistant.
                seen_user_voice = True
        elif not seen_user_voice:
            problems.append(HistoryProblem("assistant_first", i, "an assistant message before any user turn"))
            seen_user_voice = True  # report once
    if seen_summary and not any(isinstance(m, ModelRequest) and has_user_voice(m) for m in messages):
        problems.append(HistoryProblem("summary_only", 0, "the history holds summaries but no user turn"))


def _check_pairs(messages: Sequence[ModelMessage], for_request: bool, problems: list[HistoryProblem]) -> None:
    """Calls must be answered in the run of requests right after their response; results must follow their call."""
    open_calls: dict[str, int] = {}  # calls of the latest response still waiting for a result
    answered: set[str] = set()
    response_at = -1
    for i, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            _report_unanswered(open_calls, answered, problems)
            open_calls = {p.tool_call_id: i for p in message.parts if _is_tool_call(p)}  # type: ignore[union-attr]
            answered = set()
            response_at = i
            continue
        text_before = False
        for part in message.parts:
            if not _is_tool_result(part):
                text_before = text_before or not isinstance(part, SystemPromptPart)
                continue
            call_id = _result_call_id(part)
            if call_id in answered:
                problems.append(HistoryProblem("duplicate_return", i, "a second result for one call", call_id))
            elif call_id in open_calls:
                answered.add(call_id)
                _check_placement(i, response_at, text_before, call_id, problems)
            else:
                problems.append(
                    HistoryProblem(
                        "orphan_return", i, "a tool result whose call is not in the response before it", call_id
                    )
                )
    last_is_request = isinstance(messages[-1], ModelRequest)
    if last_is_request or for_request:
        _report_unanswered(open_calls, answered, problems)


def _check_placement(i: int, response_at: int, text_before: bool, call_id: str, problems: list[HistoryProblem]) -> None:
    """A result that answers its call must be in the request right after the response, before any user text."""
    if i != response_at + 1:
        problems.append(
            HistoryProblem(
                "split_results", i, "a tool result in a later request than the one right after its call", call_id
            )
        )
    elif text_before:
        problems.append(
            HistoryProblem("results_after_text", i, "a tool result after user text in its request", call_id)
        )


def _report_unanswered(open_calls: dict[str, int], answered: set[str], problems: list[HistoryProblem]) -> None:
    for call_id, at in open_calls.items():
        if call_id not in answered:
            problems.append(HistoryProblem("orphan_call", at, "a tool call with no result after it", call_id))
