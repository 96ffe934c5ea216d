"""Background compaction (`background_start`) through `Agent.run`: the summary of the next compaction is prepared
during the run, used at the trigger without a model call on the request path, and never outlives the run.

No test depends on timing: the summarizer blocks on `anyio` events the test (or the agent's scripted model)
controls, and the agent's model waits for a preparation to finish where a test needs it finished."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai import (
    CompactionCompleted,
    CompactionStarted,
    ContextEvent,
    ContextManagerMiddleware,
    SummarizationProcessor,
    is_summary_message,
    validate_history,
)
from summarization_pydantic_ai.cost import CostTrackingMiddleware, report_summarizer_usage
from summarization_pydantic_ai.summarize import SummaryRequest
from summarization_pydantic_ai.summarize._validate import DEFAULT_REQUIRED_SECTIONS

SUMMARY_USAGE = RequestUsage(input_tokens=1_000, output_tokens=100)


@dataclass
class Summarizer:
    """Writes a short valid summary naming the MARK- words of its span; `hold` blocks the calls listed (by number,
    from 1) until `release` is set; `fail` lists the calls that raise. Records what it saw."""

    name: str = "scripted"
    hold: set[int] = field(default_factory=set[int])
    fail: set[int] = field(default_factory=set[int])
    release: anyio.Event = field(default_factory=anyio.Event)
    calls: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    finished: int = 0
    cancelled: int = 0
    started_at_request: list[int] = field(default_factory=list[int])
    started: anyio.Event = field(default_factory=anyio.Event)
    requests: Any = None
    """A callable giving the agent's model-request count (set by `Script`)."""

    async def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        number = self.calls
        self.started_at_request.append(self.requests() if self.requests else -1)
        self.started.set()
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if number in self.hold:
                await self.release.wait()
            if number in self.fail:
                raise RuntimeError("summary model unavailable")
            report_summarizer_usage(SUMMARY_USAGE, "gpt-4o-mini", "openai")
            marks = sorted({mark for m in request.messages for mark in re.findall(r"MARK-[\w-]+(?:\.py)?", str(m))})
            body = "\n".join(f"## {title}\nshort" for title in DEFAULT_REQUIRED_SECTIONS)
            self.finished += 1
            return f"{body}\nmarks: {' '.join(marks)}\n## Latest user request\n{request.latest_user_request}"
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1


@dataclass
class Script:
    """The agent's model: `reads` tool calls, then an answer. Before each request after the first, it waits for a
    preparation in flight to finish when `wait_for_summaries` (so the trigger finds it done)."""

    summarizer: Summarizer
    reads: int = 40
    wait_for_summaries: bool = True
    fail_at: int | None = None
    requests: int = 0
    compaction_requests: list[int] = field(default_factory=list[int])

    def __post_init__(self) -> None:
        self.summarizer.requests = lambda: self.requests

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests += 1
        if self.fail_at == self.requests:
            raise ValueError("the agent's model failed")
        while self.wait_for_summaries and self.summarizer.in_flight:
            await anyio.sleep(0.001)
        if self.requests <= self.reads:
            call = ToolCallPart("read", {"path": f"/src/f{self.requests}.py"}, tool_call_id=f"c{self.requests}")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("done")])


def make_agent(script: Script, capabilities: list[Any]) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(script), capabilities=capabilities)

    @agent.tool_plain
    def read(path: str) -> str:
        return f"# {path} MARK-{path.rsplit('/', maxsplit=1)[-1]}\n" + "def f():\n    return 42\n" * 30

    return agent


def middleware(summarizer: Summarizer, events: list[ContextEvent], **kwargs: Any) -> ContextManagerMiddleware:
    return ContextManagerMiddleware(
        max_tokens=6_000, summarization_model=summarizer, event_callback=events.append, **kwargs
    )


def recorder(events: list[ContextEvent], script: Script) -> Any:
    """An event callback that also notes the agent's request at which each compaction started."""

    def record(event: ContextEvent) -> None:
        events.append(event)
        if isinstance(event, CompactionStarted):
            script.compaction_requests.append(script.requests)

    return record


def completed(events: list[ContextEvent]) -> list[CompactionCompleted]:
    return [e for e in events if isinstance(e, CompactionCompleted)]


def no_task_left() -> bool:
    return asyncio.all_tasks() == {asyncio.current_task()}


def stored(path: Path) -> list[ModelMessage]:
    return list(ModelMessagesTypeAdapter.validate_json(path.read_bytes()))


async def test_the_request_at_the_threshold_uses_the_prepared_summary_and_calls_no_model(tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    summarizer = Summarizer()
    script = Script(summarizer)
    manager = middleware(summarizer, events, background_start=0.5, messages_path=tmp_path / "messages.json")
    manager.event_callback = recorder(events, script)
    result = await make_agent(script, [manager]).run("read the files")

    done = completed(events)
    assert done and all(e.prepared_in_background for e in done)
    assert all(e.prepared_in_background for e in events if isinstance(e, CompactionStarted))
    # Every summary was written during an earlier request, none at the request where the trigger fired.
    assert summarizer.finished == len(done)
    assert set(summarizer.started_at_request).isdisjoint(script.compaction_requests)
    assert all(
        start < fired for start, fired in zip(summarizer.started_at_request, script.compaction_requests, strict=False)
    )
    assert validate_history(result.all_messages(), for_request=False) == []
    records = stored(tmp_path / "messages.json")
    assert sum(is_summary_message(m) for m in records) == len(done)
    assert no_task_left()


async def test_without_background_start_the_request_at_the_threshold_calls_the_summarizer() -> None:
    events: list[ContextEvent] = []
    summarizer = Summarizer()
    script = Script(summarizer)
    manager = middleware(summarizer, events)
    manager.event_callback = recorder(events, script)
    await make_agent(script, [manager]).run("read the files")
    done = completed(events)
    assert done and not any(e.prepared_in_background for e in done)
    assert summarizer.started_at_request == script.compaction_requests  # asked on the request path


async def test_an_unfinished_preparation_falls_back_to_the_synchronous_summary_and_is_cancelled() -> None:
    events: list[ContextEvent] = []
    summarizer = Summarizer(hold={1})  # the preparation never finishes by itself
    script = Script(summarizer, wait_for_summaries=False)
    manager = middleware(summarizer, events, background_start=0.5)
    result = await make_agent(script, [manager]).run("read the files")
    done = completed(events)
    assert done and not done[0].prepared_in_background
    assert summarizer.cancelled >= 1, "the unfinished preparation was cancelled at the trigger"
    assert summarizer.most_in_flight <= 2  # the held preparation and at most the synchronous call beside it
    assert validate_history(result.all_messages(), for_request=False) == []
    assert no_task_left()


async def test_at_most_one_preparation_is_in_flight() -> None:
    events: list[ContextEvent] = []
    summarizer = Summarizer(hold={1})
    script = Script(summarizer, reads=20, wait_for_summaries=False)  # ends before the trigger
    manager = middleware(summarizer, events, background_start=0.3)
    await make_agent(script, [manager]).run("read the files")
    assert summarizer.calls == 1 and summarizer.most_in_flight == 1
    assert not completed(events)
    assert summarizer.cancelled == 1, "the run ended: its preparation was cancelled"
    assert no_task_left()


async def test_a_cancelled_run_leaves_no_task_no_half_written_record_and_a_valid_history(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    events: list[ContextEvent] = []
    summarizer = Summarizer(hold={1})
    script = Script(summarizer, wait_for_summaries=False)
    manager = middleware(summarizer, events, background_start=0.5, messages_path=path)
    run = asyncio.create_task(make_agent(script, [manager]).run("read the files"))
    await summarizer.started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert summarizer.cancelled == 1
    assert no_task_left()
    records = stored(path)  # the whole file decodes: no record half-written
    assert records and not any(is_summary_message(m) for m in records)
    assert validate_history(records, for_request=False) == []


async def test_a_failing_run_raises_its_own_error_and_cancels_the_preparation(tmp_path: Path) -> None:
    summarizer = Summarizer(hold={1})
    script = Script(summarizer, wait_for_summaries=False, fail_at=20)  # after the preparation began, before the trigger
    manager = middleware(summarizer, [], background_start=0.5, messages_path=tmp_path / "messages.json")
    with pytest.raises(ValueError, match="the agent's model failed"):  # not wrapped in an exception group
        await make_agent(script, [manager]).run("read the files")
    assert summarizer.calls == 1 and summarizer.cancelled == 1
    assert no_task_left()
    records = stored(tmp_path / "messages.json")
    assert validate_history(records, for_request=False) == []


async def test_a_summarizer_raising_in_the_background_falls_back_to_the_synchronous_path(tmp_path: Path) -> None:
    events: list[ContextEvent] = []
    summarizer = Summarizer(fail={1, 2})  # the preparation's call and its one retry
    script = Script(summarizer)
    manager = middleware(summarizer, events, background_start=0.5, messages_path=tmp_path / "messages.json")
    result = await make_agent(script, [manager]).run("read the files")
    done = completed(events)
    assert done and not done[0].prepared_in_background
    assert done[0].summarizer == "scripted" and done[0].fallback_reason is None  # asked again at the trigger
    assert validate_history(result.all_messages(), for_request=False) == []
    assert sum(is_summary_message(m) for m in stored(tmp_path / "messages.json")) == len(done)
    assert no_task_left()


@dataclass
class Editor(AbstractCapability[Any]):
    """Once a preparation is under way, rewrites the first tool output in the run's history (a new message), and
    lets the stale preparation finish: it must not be used."""

    summarizer: Summarizer
    edited: bool = False

    async def before_model_request(self, ctx: RunContext[Any], request_context: ModelRequestContext) -> Any:
        if self.summarizer.calls and not self.edited:
            self.edited = True
            self.summarizer.release.set()
            for i, message in enumerate(ctx.messages):
                if isinstance(message, ModelRequest) and "MARK-f1.py" in str(message):
                    part = message.parts[0]
                    assert isinstance(part, ToolReturnPart)
                    ctx.messages[i] = ModelRequest(parts=[replace(part, content="MARK-edited")])
                    request_context.messages = list(ctx.messages)
                    break
        return request_context


async def test_a_history_edited_during_the_preparation_is_not_summarized_from_its_old_version() -> None:
    events: list[ContextEvent] = []
    summarizer = Summarizer(hold={1})
    script = Script(summarizer, wait_for_summaries=False)
    editor = Editor(summarizer)
    manager = middleware(summarizer, events, background_start=0.5)
    result = await make_agent(script, [editor, manager]).run("read the files")
    assert editor.edited
    summaries = [m for m in result.all_messages() if is_summary_message(m)]
    assert summaries
    text = str(summaries[0].parts[0].content)
    marks = next(line for line in text.splitlines() if line.startswith("marks:")).split()[1:]
    assert "MARK-edited" in marks and "MARK-f1.py" not in marks
    assert validate_history(result.all_messages(), for_request=False) == []
    assert no_task_left()


async def test_the_prepared_summarys_calls_are_counted_and_a_discarded_ones_carried_to_the_next_summary(
    tmp_path: Path,
) -> None:
    events: list[ContextEvent] = []
    summarizer = Summarizer()
    script = Script(summarizer)
    manager = middleware(summarizer, events, background_start=0.5, messages_path=tmp_path / "messages.json")
    cost = CostTrackingMiddleware(context_manager=manager)
    await make_agent(script, [manager, cost]).run("read the files")
    totals = cost.run_totals
    assert totals is not None and completed(events)
    # Every finished call is counted; the run's last preparation (if any) was cancelled before it reported.
    assert totals.summarizer.requests == summarizer.finished
    assert totals.summarizer.input_tokens == SUMMARY_USAGE.input_tokens * summarizer.finished


async def test_the_summarization_processor_prepares_in_the_background_too() -> None:
    events: list[ContextEvent] = []
    summarizer = Summarizer()
    script = Script(summarizer)
    processor = SummarizationProcessor(
        summarizer,
        trigger=("fraction", 0.9),
        keep=("messages", 4),
        max_tokens=6_000,
        background_start=("fraction", 0.5),
        event_callback=recorder(events, script),
    )
    result = await make_agent(script, [processor]).run("read the files")
    done = completed(events)
    assert done and all(e.prepared_in_background for e in done)
    assert set(summarizer.started_at_request).isdisjoint(script.compaction_requests)
    assert validate_history(result.all_messages(), for_request=False) == []
    assert no_task_left()


@pytest.mark.parametrize(
    "value",
    [True, 0.0, 1.0, 1.5, -3, 0, ("messages", 10), ("fraction", 1.0), ("tokens", 0), "half", (0.5,)],
)
def test_bad_background_start_values_are_refused_saying_what_is_accepted(value: Any) -> None:
    for build in (
        lambda: ContextManagerMiddleware(background_start=value),
        lambda: SummarizationProcessor(None, trigger=("fraction", 0.8), background_start=value),
    ):
        with pytest.raises(ValueError, match="background_start must be None, a fraction of the window"):
            build()


def test_background_start_must_be_below_the_trigger() -> None:
    with pytest.raises(ValueError, match="below the trigger"):
        ContextManagerMiddleware(compress_threshold=0.8, background_start=0.8)
    with pytest.raises(ValueError, match="below the trigger"):
        SummarizationProcessor(None, trigger=("tokens", 5_000), background_start=6_000)
    # The accepted forms
    assert ContextManagerMiddleware(background_start=0.6)._background_start == ("fraction", 0.6)
    assert ContextManagerMiddleware(background_start=5_000)._background_start == ("tokens", 5_000)
    processor = SummarizationProcessor(None, trigger=("fraction", 0.8), background_start=("tokens", 1_000))
    assert processor._background_start == ("tokens", 1_000)


async def test_the_plain_form_compacts_synchronously() -> None:
    """`await processor(messages)` has no run to own a preparation: nothing runs in the background."""
    summarizer = Summarizer()
    processor = SummarizationProcessor(
        summarizer, trigger=("messages", 6), keep=("messages", 2), background_start=("tokens", 10)
    )
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("start")])]
    for i in range(4):
        history += [ModelResponse(parts=[TextPart(f"answer {i} " * 40)]), ModelRequest(parts=[UserPromptPart(f"q{i}")])]
    out = await processor(history)
    assert summarizer.calls == 1 and any(is_summary_message(m) for m in out)
    assert no_task_left()
