"""AgentDrivenCompression end to end: a scripted agent with a write-file tool is asked to write its memory."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    AgentCompressionCompleted,
    AgentCompressionFallback,
    AgentCompressionRequested,
    AgentDrivenCompression,
    CompactionCompleted,
    CompactionFailed,
    ContextEvent,
    ContextManagerMiddleware,
    JsonHistoryStore,
    UsageAnchoredCounter,
    get_message_id,
    is_summary_message,
    validate_history,
)

MEMORY = "# Recent\n- task: read the modules one by one\n- done: several modules read\n- next: read the rest"
PROMPT = "Read every module of the project, one at a time, and tell me what f returns."
MAX_TOKENS = 6_000


@dataclass
class Scripted:
    """Reads modules until done; when asked to compress it complies, ignores the request, or lies (`behaviour`)."""

    behaviour: str = "comply"
    reads: int = 24
    memory: str = MEMORY
    seen: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    done: int = 0
    tools: set[str] = field(default_factory=set[str])

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.tools |= {t.name for t in info.function_tools}
        last = messages[-1]
        returned = {p.tool_name for p in last.parts if isinstance(p, ToolReturnPart)}
        if asked(last) and self.behaviour == "comply":
            if "write_file" in returned:
                return call("compression_complete", {})
            return call("write_file", {"path": "memory/short_term/recent.md", "content": self.memory})
        if asked(last) and self.behaviour == "no_write":
            return call("compression_complete", {})
        if self.done < self.reads:
            self.done += 1
            return call("read", {"path": f"src/module_{self.done}.py"})
        return ModelResponse(parts=[TextPart("f returns 42 everywhere")])


def asked(message: ModelMessage) -> bool:
    return any(isinstance(p, UserPromptPart) and "compression_complete" in str(p.content) for p in message.parts)


_calls = 0


def call(tool: str, args: dict[str, Any]) -> ModelResponse:
    global _calls
    _calls += 1
    return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=f"c{_calls}")])


def write_under(root: Path) -> Callable[[str, str], None]:
    def write(path: str, content: str) -> None:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)

    return write


def make_agent(
    model: Scripted, root: Path, *capabilities: Any, write: Callable[[str, str], None] | None = None
) -> Agent[None, str]:
    """An agent with a `read` tool and a `write_file` tool (writing under `root`, or through `write`)."""
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=list(capabilities))
    writer = write or write_under(root)

    @agent.tool_plain
    def read(path: str) -> str:
        return f"# {path}\n" + "def f():\n    return 42\n" * 60

    @agent.tool_plain
    def write_file(path: str, content: str) -> str:
        writer(path, content)
        return f"wrote {len(content)} characters to {path}"

    return agent


def of(kind: type[Any], events: list[ContextEvent]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def user_prompts(messages: list[ModelMessage]) -> list[str]:
    return [str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart)]


async def test_agent_writes_its_memory_and_the_history_is_cut_to_it(tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(max_tokens=MAX_TOKENS, root=tmp_path, event_callback=events.append)
    model = Scripted("comply")
    result = await make_agent(model, tmp_path, compression).run(PROMPT)

    [requested, *_] = of(AgentCompressionRequested, events)
    assert requested.attempt == 1 and requested.tokens >= 0.75 * MAX_TOKENS
    [completed, *_] = of(AgentCompressionCompleted, events)
    assert completed.attempt == 1
    assert completed.tokens_after <= 0.20 * MAX_TOKENS < completed.tokens_before
    assert completed.messages_after < completed.messages_before
    assert of(AgentCompressionFallback, events) == []

    # The request after the compaction starts from the memory, and the user's request is there verbatim.
    after = next(seen for seen in model.seen if any(map(is_summary_message, seen)))
    summary = next(p for m in after for p in m.parts if isinstance(p, CompactionPart))
    assert MEMORY in (summary.content or "")
    assert "memory/short_term/recent.md" in (summary.content or "")
    assert PROMPT in user_prompts(after)
    assert validate_history(after) == []

    history = result.all_messages()
    assert validate_history(history, for_request=False) == []
    assert result.output == "f returns 42 everywhere"
    # The request was shown on the wire only: it never became part of the run's history.
    assert not any(asked(m) for m in history)
    assert user_prompts(history) == [PROMPT]


async def test_each_crossing_of_the_trigger_asks_once(tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(max_tokens=MAX_TOKENS, root=tmp_path, event_callback=events.append)
    model = Scripted("comply", reads=38)
    result = await make_agent(model, tmp_path, compression).run(PROMPT)
    requested, completed = of(AgentCompressionRequested, events), of(AgentCompressionCompleted, events)
    assert len(requested) == len(completed) >= 2  # asked again once the history grew back, never in between
    assert all(r.attempt == 1 and r.tokens >= 0.75 * MAX_TOKENS for r in requested)
    history = result.all_messages()
    assert validate_history(history, for_request=False) == []
    assert PROMPT in user_prompts(history)
    summaries = [p for m in history for p in m.parts if isinstance(p, CompactionPart)]
    assert len(summaries) == 1 and MEMORY in (summaries[0].content or "")  # the latest memory replaced the first


async def test_an_agent_that_ignores_the_request_twice_gets_an_algorithmic_summary(tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(max_tokens=MAX_TOKENS, root=tmp_path, event_callback=events.append)
    model = Scripted("ignore")
    result = await make_agent(model, tmp_path, compression).run(PROMPT)

    first, second, *_ = of(AgentCompressionRequested, events)
    assert (first.attempt, second.attempt) == (1, 2)
    assert second.previous_failure is not None and "compression_complete was not called" in second.previous_failure
    [fallback, *_] = of(AgentCompressionFallback, events)
    assert fallback.attempts == 2
    [summarized, *_] = of(CompactionCompleted, events)
    assert summarized.summarizer == "deterministic"
    assert summarized.tokens_after <= 0.20 * MAX_TOKENS < summarized.tokens_before
    assert of(AgentCompressionCompleted, events) == []
    # Each attempt carried the request on at most attempt_steps=3 requests; the fallback follows the sixth.
    asked_at = [i for i, seen in enumerate(model.seen) if asked(seen[-1])]
    assert len(asked_at) >= 6 and asked_at[:6] == list(range(asked_at[0], asked_at[0] + 6))
    assert any(map(is_summary_message, model.seen[asked_at[5] + 1]))

    history = result.all_messages()
    assert validate_history(history, for_request=False) == []
    assert any(map(is_summary_message, history))
    assert PROMPT in user_prompts(history)
    assert not (tmp_path / "memory").exists()


async def test_calling_compression_complete_without_writing_is_a_failed_attempt(tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    stale = tmp_path / "memory/short_term/recent.md"
    stale.parent.mkdir(parents=True)
    stale.write_text("an old memory, from before the request")
    compression = AgentDrivenCompression(max_tokens=MAX_TOKENS, root=tmp_path, event_callback=events.append)
    model = Scripted("no_write")
    result = await make_agent(model, tmp_path, compression).run(PROMPT)

    _, second, *_ = of(AgentCompressionRequested, events)
    assert second.attempt == 2
    assert second.previous_failure == "memory/short_term/recent.md was not written since the request"
    [fallback, *_] = of(AgentCompressionFallback, events)
    assert fallback.attempts == 2 and "not written since the request" in fallback.reason
    assert of(AgentCompressionCompleted, events) == []
    answers = [
        str(p.content)
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "compression_complete"
    ]
    assert "call compression_complete again" in answers[0]
    assert "No attempts left" in answers[1]
    assert validate_history(result.all_messages(), for_request=False) == []


async def test_a_memory_file_that_does_not_exist_is_a_failed_attempt(tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(
        max_tokens=MAX_TOKENS, root=tmp_path, max_attempts=1, event_callback=events.append
    )
    await make_agent(Scripted("no_write"), tmp_path, compression).run(PROMPT)
    [fallback, *_] = of(AgentCompressionFallback, events)
    assert fallback.attempts == 1 and "does not exist" in fallback.reason


async def test_a_memory_too_long_for_the_target_is_refused(tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(max_tokens=MAX_TOKENS, root=tmp_path, event_callback=events.append)
    await make_agent(Scripted("comply", memory="word " * 2_000), tmp_path, compression).run(PROMPT)
    [_, second, *_] = of(AgentCompressionRequested, events)
    assert second.previous_failure is not None and "is too long" in second.previous_failure
    assert of(AgentCompressionCompleted, events) == []
    assert len(of(AgentCompressionFallback, events)) >= 1


async def test_a_pluggable_reader_is_used_instead_of_the_local_filesystem(tmp_path: Path) -> None:
    files: dict[str, str] = {}
    paths: list[str] = []

    async def reader(ctx: Any, path: str) -> str | None:
        paths.append(path)
        return files.get(path)

    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(
        max_tokens=MAX_TOKENS, root=tmp_path / "unused", reader=reader, event_callback=events.append
    )
    agent = make_agent(Scripted("comply"), tmp_path, compression, write=files.__setitem__)
    await agent.run(PROMPT)
    assert set(paths) == {"memory/short_term/recent.md"}
    [completed, *_] = of(AgentCompressionCompleted, events)
    assert completed.attempt == 1
    assert not (tmp_path / "unused").exists()


async def test_everything_is_recorded_before_the_history_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(
        max_tokens=MAX_TOKENS, summarization_model=None, messages_path=path, token_counter=UsageAnchoredCounter()
    )
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(
        max_tokens=MAX_TOKENS, root=tmp_path, middleware=middleware, event_callback=events.append
    )
    model = Scripted("comply")
    # The compression runs first (outermost): what it cuts was never seen by the middleware's own recording.
    result = await make_agent(model, tmp_path, compression, middleware).run(PROMPT)
    assert of(AgentCompressionCompleted, events)
    records = ModelMessagesTypeAdapter.validate_json(path.read_bytes())
    record_ids = [get_message_id(m) for m in records]
    assert len(record_ids) == len(set(record_ids))
    for seen in model.seen:
        assert {get_message_id(m) for m in seen} <= set(record_ids)
    assert {get_message_id(m) for m in result.all_messages()} <= set(record_ids)
    assert sum(map(is_summary_message, records)) == 1
    loaded = await middleware.store.load()  # type: ignore[union-attr]
    assert validate_history(loaded, for_request=False) == []


async def test_a_history_store_records_everything_and_the_memory(tmp_path: Path) -> None:
    store = JsonHistoryStore.open(tmp_path / "messages.json")
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(
        max_tokens=MAX_TOKENS, root=tmp_path, history_store=store, event_callback=events.append
    )
    model = Scripted("comply")
    await make_agent(model, tmp_path, compression).run(PROMPT)
    [completed] = of(AgentCompressionCompleted, events)
    records = await store.load_all()
    recorded = {get_message_id(m) for m in records}
    last_before_cut = next(seen for seen in model.seen if any(map(is_summary_message, seen)))
    before_cut = model.seen[model.seen.index(last_before_cut) - 1]
    for message in before_cut:  # what the cut removed is in the store
        if get_message_id(message) is not None:
            assert get_message_id(message) in recorded
        else:  # the copy the model was sent, with the request: recorded without it
            parts = [
                p
                for p in message.parts
                if not (isinstance(p, UserPromptPart) and "compression_complete" in str(p.content))
            ]
            assert message is before_cut[-1] and any(r.parts == parts for r in records)
    assert sum(map(is_summary_message, records)) == 1
    assert validate_history(await store.load(), for_request=False) == []
    assert completed.messages_before > completed.messages_after


async def test_when_recording_fails_nothing_is_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = JsonHistoryStore.open(tmp_path / "messages.json")

    async def broken(messages: Any) -> int:
        raise OSError("disk full")

    monkeypatch.setattr(store, "append", broken)
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(
        max_tokens=MAX_TOKENS, root=tmp_path, history_store=store, event_callback=events.append
    )
    model = Scripted("comply", reads=20)
    result = await make_agent(model, tmp_path, compression).run(PROMPT)
    [failed] = of(CompactionFailed, events)
    assert failed.error == "OSError: disk full"
    assert of(AgentCompressionCompleted, events) == []
    history = result.all_messages()
    assert not any(map(is_summary_message, history))
    assert user_prompts(history) == [PROMPT] and validate_history(history, for_request=False) == []


async def test_a_middleware_given_does_the_fallback(tmp_path: Path) -> None:
    middleware = ContextManagerMiddleware(
        max_tokens=MAX_TOKENS,
        summarization_model=None,
        messages_path=tmp_path / "messages.json",
        token_counter=UsageAnchoredCounter(),  # the same measure as the compression's: its trigger (0.75) is first
    )
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(
        max_tokens=MAX_TOKENS, root=tmp_path, middleware=middleware, event_callback=events.append
    )
    result = await make_agent(Scripted("ignore"), tmp_path, compression, middleware).run(PROMPT)
    assert of(AgentCompressionFallback, events)
    assert middleware.compression_count >= 1
    assert validate_history(result.all_messages(), for_request=False) == []


async def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "memory").mkdir(parents=True)
    (outside / "short_term").mkdir(parents=True)
    os.symlink(outside, root / "memory" / "short_term", target_is_directory=True)
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(max_tokens=MAX_TOKENS, root=root, event_callback=events.append)
    await make_agent(Scripted("no_write"), root, compression).run(PROMPT)
    [fallback, *_] = of(AgentCompressionFallback, events)
    assert "leads outside the memory root" in fallback.reason


def test_below_the_trigger_nothing_is_asked(tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(max_tokens=200_000, root=tmp_path, event_callback=events.append)
    model = Scripted("comply", reads=3)
    result = make_agent(model, tmp_path, compression).run_sync(PROMPT)
    assert events == []
    assert not any(asked(seen[-1]) for seen in model.seen)
    assert "compression_complete" in model.tools
    assert result.output == "f returns 42 everywhere"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"trigger": 0.0}, "trigger must be a fraction in (0, 1)"),
        ({"trigger": 1.0}, "trigger must be a fraction in (0, 1)"),
        ({"trigger": 1.5}, "trigger must be a fraction in (0, 1)"),
        ({"target_ratio": 0.75}, "target_ratio must be in (0, trigger=0.75)"),
        ({"target_ratio": 0.9}, "target_ratio must be in (0, trigger=0.75)"),
        ({"target_ratio": 0.0}, "target_ratio must be in (0, trigger=0.75)"),
        ({"max_attempts": 0}, "max_attempts must be >= 1"),
        ({"attempt_steps": 0}, "attempt_steps must be >= 1"),
        ({"short_term_path": "../recent.md"}, "must stay inside the memory root"),
        ({"short_term_path": "memory/../../recent.md"}, "must stay inside the memory root"),
        ({"short_term_path": "/etc/recent.md"}, "must be relative to the memory root"),
        ({"long_term_path": "/tmp/notes.md"}, "must be relative to the memory root"),
        ({"short_term_path": ""}, "must be a non-empty relative path"),
        ({"request_template": "write {file}"}, "placeholders are"),
    ],
)
def test_bad_options_are_refused_with_a_clear_error(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        AgentDrivenCompression(**options)
    assert message in str(raised.value)


def test_middleware_and_history_store_are_exclusive(tmp_path: Path) -> None:
    middleware = ContextManagerMiddleware(summarization_model=None)
    store = ContextManagerMiddleware(summarization_model=None).store_for(tmp_path / "m.json")
    with pytest.raises(ValueError, match="either middleware"):
        AgentDrivenCompression(middleware=middleware, history_store=store)


def test_a_middleware_that_would_compress_first_is_refused() -> None:
    middleware = ContextManagerMiddleware(summarization_model=None, compress_threshold=0.7)
    with pytest.raises(ValueError, match="the agent would never be asked"):
        AgentDrivenCompression(middleware=middleware)
    AgentDrivenCompression(middleware=middleware, trigger=0.6, target_ratio=0.2)


def test_backslash_paths_are_normalized() -> None:
    assert AgentDrivenCompression(short_term_path="mem\\recent.md").short_term_path == "mem/recent.md"
    with pytest.raises(ValueError, match="must stay inside the memory root"):
        AgentDrivenCompression(short_term_path="mem\\..\\..\\recent.md")


async def test_a_chat_agent_that_answers_instead_counts_across_runs_then_falls_back(tmp_path: Path) -> None:
    """Each run is one answer: a run ends in the middle of the compression, and its attempt still counts."""
    events: list[ContextEvent] = []
    compression = AgentDrivenCompression(max_tokens=MAX_TOKENS, root=tmp_path, event_callback=events.append)
    asked_in: list[int] = []
    run = 0

    def chat(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if asked(messages[-1]):
            asked_in.append(run)
        return ModelResponse(parts=[TextPart(f"answer {run}: " + "f returns 42. " * 120)])

    agent: Agent[None, str] = Agent(FunctionModel(chat), capabilities=[compression])
    history: list[ModelMessage] | None = None
    while not of(AgentCompressionFallback, events) and run < 30:
        run += 1
        result = await agent.run(f"question {run}", message_history=history)
        history = result.all_messages()
        assert validate_history(history, for_request=False) == []
    first, second = of(AgentCompressionRequested, events)
    assert (first.attempt, second.attempt) == (1, 2)
    assert second.previous_failure == "the run ended before compression_complete was called"
    assert asked_in == [run - 2, run - 1]  # asked in two runs; the third run compacts before its request
    [fallback] = of(AgentCompressionFallback, events)
    assert fallback.attempts == 2
    assert history is not None and any(map(is_summary_message, history))
    assert f"question {run}" in user_prompts(history)
