"""End-to-end: a provider that rejects requests over its window (OpenAI and Anthropic wordings, or none) and a
`ContextManagerMiddleware` that does not know that window: every run completes through overflow recovery."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    ContextEvent,
    ContextManagerMiddleware,
    JsonHistoryStore,
    OverflowRecovered,
    OverflowRecoveryFailed,
    count_tokens_approximately,
    get_message_id,
    is_summary_message,
    validate_history,
)

WINDOW = 20_000
"""The provider's window, in its own tokens; the middleware is not told (it assumes 200,000)."""
OUTPUT = 2_000
"""What the provider reserves for the answer (`max_tokens`), in the styles that count it."""
FACTOR = 1.25
"""The provider's tokenizer counts 25% more than our estimate."""
LADDER = ("clear_tool_results", "truncate_tool_returns", "summarize", "slide_window")
NEW_REQUEST = "Now add a test for the parser and run it."


def _body(style: str, prompt: int) -> Any:
    if style == "openai":
        message = (
            f"This model's maximum context length is {WINDOW} tokens. However, your messages resulted in {prompt} "
            "tokens. Please reduce the length of the messages."
        )
        return {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    if style == "openai_completion":
        message = (
            f"This model's maximum context length is {WINDOW} tokens. However, you requested {prompt + OUTPUT} "
            f"tokens ({prompt} in the messages, {OUTPUT} in the completion). Please reduce the length of the "
            "messages or completion."
        )
        return {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    if style == "anthropic":
        message = f"prompt is too long: {prompt} tokens > {WINDOW} maximum"
    elif style == "anthropic_sum":
        message = (
            f"input length and `max_tokens` exceed context limit: {prompt} + {OUTPUT} > {WINDOW}, decrease input "
            "length or `max_tokens` and try again"
        )
    else:
        return "prompt is too long"
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


@dataclass
class Provider:
    """A model with a window: counts what it is sent (its tokenizer: `FACTOR` x our estimate) and rejects a
    request over the window the way `style` words it. It reads one large file after the new request, then answers.
    """

    style: str
    always_overflow: bool = False
    accepted: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    rejected: list[int] = field(default_factory=list[int])
    errors: list[Exception] = field(default_factory=list[Exception])
    reads: int = 1

    @property
    def output(self) -> int:
        return OUTPUT if self.style in ("openai_completion", "anthropic_sum") else 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = int(count_tokens_approximately(messages) * FACTOR)
        if self.always_overflow or prompt + self.output > WINDOW:
            self.rejected.append(prompt)
            error = ModelHTTPError.for_category(
                ModelContextWindowExceededError,
                status_code=400,
                model_name="window-20k",
                body=_body(self.style, prompt),
            )
            self.errors.append(error)
            raise error
        self.accepted.append(list(messages))
        if self.reads:
            self.reads -= 1
            call = ToolCallPart("read_file", {"path": "src/parser.py"}, tool_call_id=f"read-new-{self.reads}")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("done")])


def _session(provider_tokens: int) -> list[ModelMessage]:
    """A finished coding session of about `provider_tokens` (in the provider's count): per turn a request, a
    file read (about 60% of the turn) and a long answer."""
    history: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart("You are a careful coding agent.")])]
    n = 0
    while int(count_tokens_approximately(history) * FACTOR) < provider_tokens:
        n += 1
        code = "".join(f"def f{n}_{i}(x):\n    return x + {i}\n" for i in range(20 + n % 7))
        history += [
            ModelRequest(parts=[UserPromptPart(f"Step {n}: look at module {n} and explain it.")]),
            ModelResponse(parts=[ToolCallPart("read_file", {"path": f"src/m{n}.py"}, tool_call_id=f"read-{n}")]),
            ModelRequest(parts=[ToolReturnPart("read_file", code, tool_call_id=f"read-{n}")]),
            ModelResponse(parts=[TextPart(f"Module {n} defines small adders. " * (8 + n % 5))]),
        ]
    if isinstance(history[0], ModelRequest) and len(history) > 1:
        first = history.pop(1)
        history[0] = ModelRequest(parts=[*history[0].parts, *first.parts])
    return history


def _agent(provider: Provider, middleware: ContextManagerMiddleware, lines: int = 900) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(provider), capabilities=[middleware])

    @agent.tool_plain
    def read_file(path: str) -> str:
        return "".join(f"line {i} of {path}: value = {i * 7}\n" for i in range(lines))  # 900: ~ 40% of the window

    return agent


def _latest_request_present(messages: list[ModelMessage], content: Any) -> bool:
    return any(
        isinstance(part, UserPromptPart) and part.content == content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
    )


def _check_recoveries(events: list[ContextEvent]) -> list[OverflowRecovered]:
    recovered = [e for e in events if isinstance(e, OverflowRecovered)]
    assert recovered, "the scenario must overflow"
    assert not [e for e in events if isinstance(e, OverflowRecoveryFailed)]
    for event in recovered:
        assert 1 <= len(event.retries) <= 2
        estimates = event.estimates
        assert all(a > b for a, b in pairwise(estimates)), estimates
        for retry in event.retries:
            assert retry.steps, "a retry is sent only after a step shrank the history"
            assert list(retry.steps) == sorted(retry.steps, key=LADDER.index), "the ladder runs mildest first"
    return recovered


CASES = [
    ("anthropic_sum", 0.95),
    ("openai_completion", 0.95),
    ("openai", 1.5),
    ("anthropic", 1.5),
    ("openai", 3.0),
    ("anthropic", 3.0),
]


@pytest.mark.parametrize(("style", "fill"), CASES, ids=[f"{s}-{int(f * 100)}%" for s, f in CASES])
async def test_overflow_recovers_within_two_smaller_retries(style: str, fill: float) -> None:
    events: list[ContextEvent] = []
    provider = Provider(style)
    middleware = ContextManagerMiddleware(summarization_model=None, event_callback=events.append)
    history = _session(int(WINDOW * fill))
    result = await _agent(provider, middleware).run(NEW_REQUEST, message_history=history)

    assert result.output == "done"
    recovered = _check_recoveries(events)
    first = recovered[0].retries[0]
    assert first.provider_limit == WINDOW and first.provider_tokens == provider.rejected[0]
    assert first.provider_output_tokens == (provider.output or None)
    assert fill * WINDOW <= provider.rejected[0] < (fill + 0.05) * WINDOW  # the scenario is the one it says
    # Every rejection was answered by one smaller retry (at most two per request step), none was left unanswered.
    assert sum(len(e.retries) for e in recovered) == len(provider.rejected)
    for messages in provider.accepted:
        assert validate_history(messages) == []
        assert _latest_request_present(messages, NEW_REQUEST)
    assert validate_history(result.all_messages(), for_request=False) == []
    steps = recovered[0].steps
    assert steps[0] == "clear_tool_results"
    if fill < 1:
        assert steps == ("clear_tool_results",), "a small overflow takes the mildest step only"
    if fill >= 3:
        # The answers alone (no tool results) are over the window: clearing cannot be enough.
        assert {"summarize", "slide_window"} & set(steps)


async def test_a_large_tool_output_in_flight_is_cut_to_head_and_tail(tmp_path: Path) -> None:
    # The file alone is over the window: clearing older results cannot be enough.
    events: list[ContextEvent] = []
    provider = Provider("anthropic")
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(summarization_model=None, messages_path=path, event_callback=events.append)
    history = _session(int(WINDOW * 0.5))
    result = await _agent(provider, middleware, lines=3_000).run(NEW_REQUEST, message_history=history)
    assert result.output == "done"
    recovered = _check_recoveries(events)
    assert "truncate_tool_returns" in recovered[-1].steps
    (read,) = [
        p
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_call_id == "read-new-0"
    ]
    assert "output truncated" in str(read.content) and str(read.content).startswith("line 0 of src/parser.py")
    assert validate_history(result.all_messages(), for_request=False) == []
    # The history file keeps the whole output.
    holder = next(m for m in result.all_messages() if any(p is read for p in m.parts))
    message_id = get_message_id(holder)
    assert message_id is not None
    store = JsonHistoryStore.open(path)
    (original,) = (await store.read(message_id, message_id)).messages
    store.close()
    (whole,) = [p for p in original.parts if isinstance(p, ToolReturnPart)]
    assert "output truncated" not in str(whole.content) and "line 2999 of src/parser.py" in str(whole.content)


async def test_an_error_without_numbers_recovers_with_our_estimate() -> None:
    events: list[ContextEvent] = []
    provider = Provider("none")
    middleware = ContextManagerMiddleware(summarization_model=None, event_callback=events.append)
    result = await _agent(provider, middleware).run(NEW_REQUEST, message_history=_session(int(WINDOW * 1.5)))
    assert result.output == "done"
    recovered = _check_recoveries(events)
    assert all(r.provider_tokens is None and r.provider_limit is None for e in recovered for r in e.retries)


async def test_a_model_that_keeps_overflowing_ends_with_the_original_error() -> None:
    events: list[ContextEvent] = []
    provider = Provider("anthropic", always_overflow=True)
    middleware = ContextManagerMiddleware(summarization_model=None, event_callback=events.append)
    with pytest.raises(ModelContextWindowExceededError) as raised:
        await _agent(provider, middleware).run(NEW_REQUEST, message_history=_session(int(WINDOW * 1.5)))
    assert raised.value is provider.errors[0]
    assert len(provider.rejected) == 3  # the request and two retries, not a loop
    (failed,) = [e for e in events if isinstance(e, OverflowRecoveryFailed)]
    assert len(failed.retries) == 2
    assert all(a > b for a, b in pairwise(failed.estimates))
    assert any("overflow recovery gave up" in note for note in raised.value.__notes__)
    assert not [e for e in events if isinstance(e, OverflowRecovered)]


async def test_nothing_left_to_cut_raises_the_original_error_at_once() -> None:
    events: list[ContextEvent] = []
    provider = Provider("anthropic", always_overflow=True)
    middleware = ContextManagerMiddleware(summarization_model=None, event_callback=events.append)
    with pytest.raises(ModelContextWindowExceededError) as raised:
        await _agent(provider, middleware).run("hi")  # one short request: no step can shrink it
    assert raised.value is provider.errors[0] and len(provider.rejected) == 1
    (failed,) = [e for e in events if isinstance(e, OverflowRecoveryFailed)]
    assert failed.reason == "nothing left to cut" and failed.retries == ()


async def test_overflow_recovery_off_raises_at_once() -> None:
    events: list[ContextEvent] = []
    provider = Provider("anthropic")
    middleware = ContextManagerMiddleware(
        summarization_model=None, overflow_recovery=False, event_callback=events.append
    )
    with pytest.raises(ModelContextWindowExceededError) as raised:
        await _agent(provider, middleware).run(NEW_REQUEST, message_history=_session(int(WINDOW * 1.5)))
    assert raised.value is provider.errors[0] and len(provider.rejected) == 1
    assert not getattr(raised.value, "__notes__", None)
    assert not [e for e in events if isinstance(e, OverflowRecovered | OverflowRecoveryFailed)]


@pytest.mark.parametrize("retries", [-1, 1.5, True])
def test_max_overflow_retries_is_validated(retries: Any) -> None:
    with pytest.raises((ValueError, TypeError), match="max_overflow_retries"):
        ContextManagerMiddleware(max_overflow_retries=retries)


TEXT = "".join(f"Requirement {i:04d}: keep every word of this request exactly as written. " for i in range(160))
IMAGE = BinaryContent(data=b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40, media_type="image/png")
REQUEST: list[UserContent] = [TEXT, IMAGE]


async def test_a_long_request_with_an_image_survives_overflow_verbatim() -> None:
    assert len(TEXT) >= 11_000
    events: list[ContextEvent] = []
    provider = Provider("openai")
    provider.reads = 3  # the request is behind the in-flight tool exchange when the window overflows
    middleware = ContextManagerMiddleware(summarization_model=None, event_callback=events.append)
    result = await _agent(provider, middleware).run(REQUEST, message_history=_session(int(WINDOW * 1.5)))
    assert result.output == "done"
    _check_recoveries(events)
    for messages in provider.accepted:
        assert _latest_request_present(messages, REQUEST), "the request lost text or its image"
        assert validate_history(messages) == []


@pytest.mark.parametrize("keep", [0, ("messages", 400)], ids=["summarize", "slide-window"])
async def test_the_recovered_history_is_persisted_once_and_originals_stay_readable(keep: Any, tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    provider = Provider("anthropic")
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(
        summarization_model=None, keep=keep, messages_path=path, event_callback=events.append
    )
    history = _session(int(WINDOW * 3))
    result = await _agent(provider, middleware).run(NEW_REQUEST, message_history=history)
    assert result.output == "done"
    steps = [step for e in _check_recoveries(events) for step in e.steps]
    assert ("summarize" if keep == 0 else "slide_window") in steps

    store = JsonHistoryStore.open(path)
    # The store holds one summary (or window marker) per compaction the recovery kept, and resumes the run's
    # working context exactly.
    recorded_summaries = [m for m in await store.load_all() if is_summary_message(m)]
    assert len(recorded_summaries) == steps.count("summarize") + steps.count("slide_window")
    assert middleware.compression_count == steps.count("summarize")  # it counts summaries
    assert [get_message_id(m) for m in await store.load()] == [get_message_id(m) for m in result.all_messages()]
    # A tool result cleared or cut in the working context is recorded verbatim.
    for message_id in [get_message_id(m) for m in history[1:9] if isinstance(m, ModelRequest)]:
        assert message_id is not None
        (original,) = (await store.read(message_id, message_id)).messages
        assert "[Tool result cleared" not in str(original) and "output truncated" not in str(original)
    store.close()


async def test_a_recovery_that_fails_itself_ends_with_the_providers_error() -> None:
    provider = Provider("anthropic")
    broken: list[bool] = []

    def counter(messages: list[ModelMessage]) -> int:
        if provider.rejected:  # the counter breaks once the provider has rejected the request
            broken.append(True)
            raise RuntimeError("tokenizer unavailable")
        return count_tokens_approximately(messages)

    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(summarization_model=None, token_counter=counter, event_callback=events.append)
    with pytest.raises(ModelContextWindowExceededError) as raised:
        await _agent(provider, middleware).run(NEW_REQUEST, message_history=_session(int(WINDOW * 1.5)))
    assert broken and raised.value is provider.errors[0]
    assert any("tokenizer unavailable" in note for note in raised.value.__notes__)
    (failed,) = [e for e in events if isinstance(e, OverflowRecoveryFailed)]
    assert failed.reason.startswith("recovery failed")


async def test_no_retries_allowed_raises_the_original_error_with_a_note() -> None:
    events: list[ContextEvent] = []
    provider = Provider("anthropic")
    middleware = ContextManagerMiddleware(
        summarization_model=None, max_overflow_retries=0, event_callback=events.append
    )
    with pytest.raises(ModelContextWindowExceededError) as raised:
        await _agent(provider, middleware).run(NEW_REQUEST, message_history=_session(int(WINDOW * 1.5)))
    assert raised.value is provider.errors[0] and len(provider.rejected) == 1
    (failed,) = [e for e in events if isinstance(e, OverflowRecoveryFailed)]
    assert "max_overflow_retries=0" in failed.reason and failed.provider_limit == WINDOW
    assert any("max_overflow_retries=0" in note for note in raised.value.__notes__)


async def test_a_streamed_run_recovers_too() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        tokens = int(count_tokens_approximately(messages) * FACTOR)
        if tokens > WINDOW:
            raise ModelContextWindowExceededError("m", f"prompt is too long: {tokens} tokens > {WINDOW} maximum")
        yield "streamed and done"

    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(summarization_model=None, event_callback=events.append)
    agent = Agent(FunctionModel(stream_function=stream), capabilities=[middleware])
    async with agent.run_stream(NEW_REQUEST, message_history=_session(int(WINDOW * 1.5))) as streamed:
        assert await streamed.get_output() == "streamed and done"
    _check_recoveries(events)


def _returns(messages: list[ModelMessage], call_id: str) -> list[ToolReturnPart]:
    return [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_call_id == call_id
    ]


@pytest.mark.parametrize("fill", [0.95, 1.5, 3.0])
async def test_overflow_recovery_keeps_the_working_set_verbatim(fill: float) -> None:
    # An early todo list and a pinned file read: the ladder clears and cuts other tool results, never these.
    events: list[ContextEvent] = []
    provider = Provider("anthropic")
    history = _session(int(WINDOW * fill))
    todos = "\n".join(f"- [ ] task {i}: refactor module {i} and add its tests" for i in range(40))
    history[1:1] = [
        ModelResponse(parts=[ToolCallPart("write_todos", {"todos": todos}, tool_call_id="todos-1")]),
        ModelRequest(parts=[ToolReturnPart("write_todos", todos, tool_call_id="todos-1")]),
    ]
    (pinned_return,) = _returns(history, "read-1")

    def pin(message: ModelMessage) -> bool:
        return any(isinstance(p, ToolReturnPart) and p.tool_call_id == "read-1" for p in message.parts)

    middleware = ContextManagerMiddleware(summarization_model=None, event_callback=events.append, pin_predicate=pin)
    result = await _agent(provider, middleware).run(NEW_REQUEST, message_history=history)
    assert result.output == "done"
    _check_recoveries(events)
    for messages in provider.accepted:
        (todo_return,) = _returns(messages, "todos-1")
        assert todo_return.content == todos
        (kept,) = _returns(messages, "read-1")
        assert kept.content == pinned_return.content
        assert validate_history(messages) == []
