"""End-to-end: ContextManagerMiddleware over several `Agent.run`s with scripted `FunctionModel`s."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext, ToolReturn
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    CallbackFailed,
    CompactionCompleted,
    CompactionSkipped,
    CompactionStarted,
    ContextEvent,
    ContextManagerMiddleware,
    JsonHistoryStore,
    SummarizerFallback,
    ToolOutputTruncated,
    get_message_id,
    is_summary_message,
    summary_info,
    validate_history,
)
from summarization_pydantic_ai._compaction import NOT_SMALLER


@dataclass
class Session:
    """A model that reads two files per prompt, then answers; it records every request it was sent."""

    calls_per_prompt: int = 2
    seen: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    calls_for_prompt: int = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        if any(isinstance(p, UserPromptPart) for p in messages[-1].parts):
            self.calls_for_prompt = 0
        if self.calls_for_prompt < self.calls_per_prompt:
            self.calls_for_prompt += 1
            n = len(self.seen)
            return ModelResponse(parts=[ToolCallPart("read", {"path": f"/src/f{n}.py"}, tool_call_id=f"call{n}")])
        return ModelResponse(parts=[TextPart(f"answer after {len(messages)} messages")])


def make_agent(session: Session, middleware: ContextManagerMiddleware, **kwargs: Any) -> Agent[Any, str]:
    agent: Agent[Any, str] = Agent(FunctionModel(session), capabilities=[middleware], **kwargs)

    @agent.tool_plain
    def read(path: str) -> str:
        return f"# {path}\n" + "def f():\n    return 42\n" * 60

    return agent


def ids(messages: list[ModelMessage]) -> list[str | None]:
    return [get_message_id(m) for m in messages]


def is_subsequence(needle: list[Any], haystack: list[Any]) -> bool:
    iterator = iter(haystack)
    return all(item in iterator for item in needle)


async def test_every_message_of_every_run_is_recorded_once_in_order(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(
        max_tokens=2_500, summarization_model=None, messages_path=path, event_callback=events.append
    )
    session = Session()
    agent = make_agent(session, middleware, system_prompt="You are a code reader.")
    history: list[ModelMessage] | None = None
    produced: list[ModelMessage] = []
    for i in range(6):
        result = await agent.run(f"Question {i}: what does f return?", message_history=history)
        produced += result.new_messages()
        history = result.all_messages()
        assert validate_history(history, for_request=False) == []
    assert middleware.compression_count >= 2
    records = ModelMessagesTypeAdapter.validate_json(path.read_bytes())
    record_ids = ids(records)
    assert len(record_ids) == len(set(record_ids)), "no message is recorded twice"
    originals = [m for m in records if not is_summary_message(m)]
    summaries = [m for m in records if is_summary_message(m)]
    assert len(summaries) == middleware.compression_count
    assert is_subsequence(ids(produced), ids(originals)), "every message of new_messages() is recorded, in order"
    for seen in session.seen:  # everything any request carried is in the file
        assert set(ids(seen)) <= set(record_ids)
    for i in range(6):  # every prompt, including the ones summarized away mid-run
        assert any(
            f"Question {i}:" in str(p.content) for m in originals for p in m.parts if isinstance(p, UserPromptPart)
        )
    assert any(is_summary_message(m) for m in history or [])
    assert any(isinstance(e, CompactionCompleted) for e in events)


async def test_resume_in_a_fresh_process_records_the_first_new_prompt(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(max_tokens=2_000, summarization_model=None, messages_path=path)
    agent = make_agent(Session(), middleware)
    history = None
    for i in range(4):
        history = (await agent.run(f"Question {i}", message_history=history)).all_messages()
    middleware.store.close()  # type: ignore[union-attr]  # the other process becomes the writer
    script = textwrap.dedent(
        f"""
        import asyncio
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart
        from pydantic_ai.models.function import FunctionModel
        from summarization_pydantic_ai import ContextManagerMiddleware, JsonHistoryStore, validate_history

        async def main():
            store = JsonHistoryStore.open({str(path)!r})
            history = await store.load()
            assert validate_history(history, for_request=False) == [], validate_history(history, for_request=False)
            seen = []
            def model(messages, info):
                seen.append(len(messages))
                return ModelResponse(parts=[TextPart('resumed fine')])
            middleware = ContextManagerMiddleware(max_tokens=2_000, summarization_model=None, history_store=store)
            agent = Agent(FunctionModel(model), capabilities=[middleware])
            result = await agent.run('RESUMED-PROMPT', message_history=history)
            print(result.output, seen[0], len(history))
        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    output, first_request_size, loaded = (
        done.stdout.split()[0:2],
        int(done.stdout.split()[2]),
        int(done.stdout.split()[3]),
    )
    assert output == ["resumed", "fine"]
    assert first_request_size == loaded + 1
    records = ModelMessagesTypeAdapter.validate_json(path.read_bytes())
    prompts = [p.content for m in records for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts[-1] == "RESUMED-PROMPT"
    assert isinstance(records[-1], ModelResponse) and records[-1].parts[0].content == "resumed fine"  # type: ignore[union-attr]


async def test_load_returns_the_working_context_not_the_raw_log(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(max_tokens=2_000, summarization_model=None, messages_path=path)
    agent = make_agent(Session(), middleware, system_prompt="SYSTEM")
    history = None
    for i in range(5):
        history = (await agent.run(f"Question {i}", message_history=history)).all_messages()
    assert history is not None
    store = middleware.store
    assert store is not None
    working = await store.load()
    assert ids(working) == ids(history), "load() is exactly the working context of the last run"
    assert validate_history(working, for_request=False) == []
    assert len(working) < len(await store.load_all())
    assert "SYSTEM" in str(working[0].parts[0])


async def test_read_history_returns_the_summarized_originals_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(
        max_tokens=2_000, summarization_model=None, messages_path=path, expose_history_tool=True
    )
    agent = make_agent(Session(), middleware)
    history = None
    originals: list[ModelMessage] = []
    for i in range(3):
        result = await agent.run(f"Question {i}", message_history=history)
        history = result.all_messages()
        originals += result.new_messages()
    summary = next(m for m in history or [] if is_summary_message(m))
    info = summary_info(summary) or {}
    page = await middleware.read_history(info["first_id"], info["last_id"], limit=500)
    by_id = {get_message_id(m): m for m in originals}
    for message in page.messages:
        original = by_id.get(get_message_id(message))
        if original is not None:
            assert ModelMessagesTypeAdapter.dump_json([message]) == ModelMessagesTypeAdapter.dump_json([original])
    assert set(info["covers"]) <= set(ids(page.messages))
    assert "read_history(start_id=" in str(summary.parts[0].content)  # type: ignore[union-attr]


async def test_the_agent_can_call_read_history(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(
        max_tokens=1_500, summarization_model=None, messages_path=path, expose_history_tool=True
    )
    history = (await make_agent(Session(), middleware).run("Question 0")).all_messages()
    store = middleware.store
    assert store is not None
    first_id = get_message_id((await store.load_all())[0])
    tool_outputs: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            tool_outputs.append(str(returns[0].content))
            return ModelResponse(parts=[TextPart("thanks")])
        return ModelResponse(parts=[ToolCallPart("read_history", {"start_id": first_id, "limit": 2})])

    agent = Agent(FunctionModel(model), capabilities=[middleware])
    await agent.run("What did I ask first?", message_history=history)
    assert tool_outputs and "Question 0" in tool_outputs[0]
    assert "call again with offset=2" in tool_outputs[0]


@pytest.mark.parametrize("form", ["capability", "process_history"])
async def test_compression_runs_once_per_trigger_crossing(form: str) -> None:
    """An in-flight tool output bigger than the trigger cannot be summarized away: compress once, not per request."""
    events: list[ContextEvent] = []
    calls = 0

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        if calls <= 4:
            return ModelResponse(parts=[ToolCallPart("big", {}, tool_call_id=f"b{calls}")])
        return ModelResponse(parts=[TextPart("done")])

    middleware = ContextManagerMiddleware(max_tokens=1_000, summarization_model=None, event_callback=events.append)
    capability = middleware if form == "capability" else ProcessHistory(middleware)
    agent = Agent(FunctionModel(model), capabilities=[capability])

    @agent.tool_plain
    def big() -> str:
        return "x" * 8_000  # ~2,000 tokens: every request is over the threshold

    await agent.run("go")
    # One attempt at the crossing. All it could replace is the prompt "go": a summary would be larger than that,
    # so it is not committed (a compaction never grows the context), and it is not attempted again.
    assert len([e for e in events if isinstance(e, CompactionStarted)]) == 1
    assert [e.reason for e in events if isinstance(e, CompactionSkipped)] == [NOT_SMALLER]
    assert not [e for e in events if isinstance(e, CompactionCompleted)]
    assert middleware.compression_count == 0


async def test_request_compact_and_compact_outside_a_run(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    middleware = ContextManagerMiddleware(summarization_model=None, messages_path=path, max_tokens=1_000_000)
    agent = make_agent(Session(), middleware)
    history = (await agent.run("Question A")).all_messages()
    assert middleware.compression_count == 0
    middleware.request_compact(focus="the files read")
    result = await agent.run("Question B", message_history=history)
    summary = next(m for m in result.all_messages() if is_summary_message(m))
    assert (summary_info(summary) or {}).get("focus") == "the files read"
    assert middleware.compression_count == 1
    compacted = await middleware.compact(result.all_messages())
    assert middleware.compression_count == 2
    assert sum(is_summary_message(m) for m in compacted) == 1
    assert validate_history(compacted, for_request=False) == []


@pytest.mark.parametrize("failure", ["raises", "empty", "timeout"])
async def test_a_failing_summarizer_leaves_history_intact_and_records_the_failure(tmp_path: Path, failure: str) -> None:
    async def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if failure == "timeout":
            await asyncio.sleep(10)
        if failure == "empty":
            return ModelResponse(parts=[TextPart("")])
        raise RuntimeError("summary backend down: 503")

    path = tmp_path / "messages.json"
    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(
        max_tokens=2_000,
        summarization_model=FunctionModel(broken),
        summary_timeout=0.2,
        messages_path=path,
        event_callback=events.append,
    )
    agent = make_agent(Session(), middleware)
    history = None
    for i in range(3):
        history = (await agent.run(f"Question {i}", message_history=history)).all_messages()
    assert any(isinstance(e, SummarizerFallback) for e in events)
    records = ModelMessagesTypeAdapter.validate_json(path.read_bytes())
    for summary in filter(is_summary_message, records):
        assert "backend down" not in str(summary.parts[0].content)  # type: ignore[union-attr]
        assert (summary_info(summary) or {})["summarizer"] == "deterministic"
    for i in range(3):
        assert any(f"Question {i}" in str(m.parts[0].content) for m in records if isinstance(m, ModelRequest))


async def test_context_window_overflow_is_compacted_and_retried() -> None:
    attempts: list[int] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        attempts.append(len(messages))
        if len(messages) > 4:
            raise ModelHTTPError.for_category(
                ModelContextWindowExceededError, status_code=400, model_name="test", body="prompt is too long"
            )
        return ModelResponse(parts=[TextPart("fits now")])

    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=1_000_000)
    agent = Agent(FunctionModel(model), capabilities=[middleware])
    history: list[ModelMessage] = []
    for i in range(4):
        history += [ModelRequest(parts=[UserPromptPart(f"old question {i}")]), ModelResponse(parts=[TextPart("old")])]
    result = await agent.run("new question", message_history=history)
    assert result.output == "fits now"
    assert attempts[0] == 9 and attempts[-1] <= 4
    assert middleware.compression_count == 1


async def test_tool_outputs_are_cut_within_budget_on_every_path() -> None:
    events: list[ContextEvent] = []
    returned: dict[str, Any] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if returns:
            returned.update({p.tool_name: p.content for p in returns})
            return ModelResponse(parts=[TextPart("ok")])
        return ModelResponse(
            parts=[
                ToolCallPart("lines", {}, tool_call_id="a"),
                ToolCallPart("one_long_line", {}, tool_call_id="b"),
                ToolCallPart("rows", {}, tool_call_id="c"),
                ToolCallPart("rich", {}, tool_call_id="d"),
            ]
        )

    middleware = ContextManagerMiddleware(
        summarization_model=None, max_tokens=1_000_000, max_tool_output_tokens=300, event_callback=events.append
    )
    agent = Agent(FunctionModel(model), capabilities=[middleware])

    @agent.tool_plain
    def lines() -> str:
        return "\n".join(f"log line {i}" for i in range(5_000))

    @agent.tool_plain
    def one_long_line() -> str:
        return "z" * 50_000

    @agent.tool_plain
    def rows() -> list[dict[str, Any]]:
        return [{"id": i, "name": f"row {i}"} for i in range(2_000)]

    @agent.tool_plain
    def rich() -> ToolReturn:
        return ToolReturn(return_value="r" * 20_000, content="extra " * 5_000)

    await agent.run("go")
    from summarization_pydantic_ai._tokens import estimate_text_tokens

    for name in ("lines", "one_long_line", "rows", "rich"):
        text = str(returned[name])
        assert estimate_text_tokens(text) <= 300, (name, estimate_text_tokens(text))
        assert "truncated" in text or "cut" in text
    assert "log line 0" in str(returned["lines"]) and "log line 4999" in str(returned["lines"])
    assert len([e for e in events if isinstance(e, ToolOutputTruncated)]) == 4


async def test_callbacks_sync_async_and_failing_ones_do_not_abort(tmp_path: Path) -> None:
    usage: list[tuple[float, int, int]] = []
    before: list[int] = []
    events: list[ContextEvent] = []

    async def on_usage(pct: float, current: int, maximum: int) -> None:
        usage.append((pct, current, maximum))

    def on_before(messages: list[ModelMessage], cutoff: int) -> None:
        before.append(cutoff)
        raise ValueError("callback bug")

    def on_after(messages: list[ModelMessage]) -> str:
        return "REMEMBER: the user prefers short answers."

    middleware = ContextManagerMiddleware(
        max_tokens=2_000,
        summarization_model=None,
        on_usage_update=on_usage,
        on_before_compress=on_before,
        on_after_compress=on_after,
        event_callback=events.append,
    )
    session = Session()
    agent = make_agent(session, middleware)
    history = None
    for i in range(3):
        history = (await agent.run(f"Question {i}", message_history=history)).all_messages()
    assert usage and all(0 < pct < 2 and maximum == 2_000 for pct, _, maximum in usage)
    assert before, "on_before_compress was called"
    assert any(isinstance(e, CallbackFailed) and e.callback == "on_before_compress" for e in events)
    summary = next(m for m in history or [] if is_summary_message(m))
    reinjected = [p for p in summary.parts if isinstance(p, SystemPromptPart)]
    assert reinjected and "prefers short answers" in reinjected[0].content
    assert middleware.usage is not None and middleware.usage.max_tokens == 2_000


async def test_100_concurrent_runs_share_one_instance_without_cross_talk(tmp_path: Path) -> None:
    def path_for(ctx: RunContext[Any]) -> Path:
        return tmp_path / f"session{ctx.deps}" / "messages.json"

    middleware = ContextManagerMiddleware(max_tokens=1_500, summarization_model=None, messages_path=path_for)

    async def one(i: int) -> list[ModelMessage]:
        agent = make_agent(Session(calls_per_prompt=1 + i % 3), middleware, deps_type=int)
        history = None
        for turn in range(2):
            history = (await agent.run(f"Session {i} turn {turn}", message_history=history, deps=i)).all_messages()
        return history or []

    histories = await asyncio.gather(*(one(i) for i in range(100)))
    summaries_written = 0
    for i, history in enumerate(histories):
        assert validate_history(history, for_request=False) == []
        records = ModelMessagesTypeAdapter.validate_json((tmp_path / f"session{i}" / "messages.json").read_bytes())
        prompts = [
            str(p.content)
            for m in records
            if not is_summary_message(m)
            for p in m.parts
            if isinstance(p, UserPromptPart)
        ]
        assert prompts == [f"Session {i} turn 0", f"Session {i} turn 1"]
        for summary in filter(is_summary_message, records):
            summaries_written += 1
            assert f"Session {i} " in str(summary.parts[0].content)  # type: ignore[union-attr]
            assert not any(f"Session {j} " in str(summary.parts[0].content) for j in range(100) if j != i)  # type: ignore[union-attr]
        assert set(ids(history)) <= set(ids(records))
    assert summaries_written == middleware.compression_count >= 50, "one shared count, per-run compaction"


def test_bad_settings_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="compress_threshold"):
        ContextManagerMiddleware(compress_threshold=1.5)
    with pytest.raises(ValueError, match="keep"):
        ContextManagerMiddleware(keep=-1)
    with pytest.raises(ValueError, match="max_tool_output_tokens"):
        ContextManagerMiddleware(max_tool_output_tokens=3)
    with pytest.raises(ValueError, match="either messages_path or history_store"):
        ContextManagerMiddleware(messages_path="a.json", history_store=JsonHistoryStore("/tmp/never-opened.json"))


async def test_compression_is_traced_as_an_opentelemetry_span() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    middleware = ContextManagerMiddleware(summarization_model=None, max_tokens=100_000)
    instrumentation = Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))
    answer = "The config file sets the timeout to 30 seconds and the retries to 5. " * 10
    agent = Agent(
        FunctionModel(lambda m, i: ModelResponse(parts=[TextPart(answer)])), capabilities=[instrumentation, middleware]
    )
    history = (await agent.run("first")).all_messages()
    middleware.request_compact(focus="files")
    await agent.run("second", message_history=history)
    spans = [s for s in exporter.get_finished_spans() if s.name == "context_manager.compress"]
    assert len(spans) == 1
    attributes = dict(spans[0].attributes or {})
    assert attributes["context_manager.messages_before"] > attributes["context_manager.messages_after"]
    assert attributes["context_manager.focus"] == "files"
