"""Issue 10, scope 3: a summary is checked before it is committed, and a compaction is a transaction (the archive
holds every replaced message before the working history changes; a failed write leaves it as it was)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
    CompactionFailed,
    ContextEvent,
    ContextManagerMiddleware,
    DeterministicSummarizer,
    JsonHistoryStore,
    SummarizationProcessor,
    SummarizerFallback,
    SummaryRequest,
    get_message_id,
    summary_info,
    summary_part,
    validate_history,
)
from summarization_pydantic_ai.summarize._validate import complete_summary, summary_problems, touched_paths

LATEST = "Now rename `load()` to `read_config()` everywhere, keep the old name as an alias."


LOADER = "\n".join(f"def load_{i}(path):\n    return parse(path, section={i})" for i in range(40))


def history() -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart("Fix the config loader in src/config/loader.py")]),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": "src/config/loader.py"}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("read_file", LOADER, tool_call_id="c1")]),
        ModelResponse(parts=[ToolCallPart("edit_file", {"file_path": "src/config/defaults.toml"}, tool_call_id="c2")]),
        ModelRequest(parts=[ToolReturnPart("edit_file", "ok", tool_call_id="c2")]),
        ModelResponse(parts=[TextPart("Fixed the loader.")]),
        ModelRequest(parts=[UserPromptPart(LATEST)]),
    ]


def sections(*titles: str) -> str:
    return "\n".join(f"## {title}\nsomething" for title in titles)


FULL = sections(*DEFAULT_REQUIRED_SECTIONS)


@dataclass
class Scripted:
    """A summarizer answering from a list (the last answer repeats); an exception in the list is raised."""

    answers: list[str | Exception]
    name: str = "scripted"
    calls: list[SummaryRequest] = field(default_factory=list[SummaryRequest])

    async def summarize(self, request: SummaryRequest) -> str:
        self.calls.append(request)
        answer = self.answers[min(len(self.calls), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


async def compact(summarizer: object, **options: object) -> tuple[list[ModelMessage], list[ContextEvent]]:
    events: list[ContextEvent] = []
    # No tool exchange in the working set: the whole (short) history is the span these checks judge.
    options = {"keep_tool_exchanges": 0, **options}
    processor = SummarizationProcessor(summarizer, trigger=None, keep=1, event_callback=events.append, **options)
    return await processor.compact(history()), events


async def test_a_summary_without_the_latest_request_is_refused_asked_again_then_replaced() -> None:
    summarizer = Scripted([FULL])  # every section, but not the latest request
    result, events = await compact(summarizer)
    assert len(summarizer.calls) == 2  # refused, asked once more, refused again
    info = summary_info(result[0]) or {}
    assert info["summarizer"] == "deterministic"
    assert "latest user request is not in it verbatim" in info["fallback_reason"]
    assert [type(e) for e in events if isinstance(e, SummarizerFallback)] == [SummarizerFallback]
    text = str((summary_part(result[0]) or TextPart("")).content)
    assert LATEST in text
    assert summary_problems(text, required_sections=DEFAULT_REQUIRED_SECTIONS, latest_request=LATEST) == []


async def test_a_second_attempt_that_passes_is_committed() -> None:
    summarizer = Scripted([RuntimeError("rate limited"), f"{FULL}\n## Latest user request\n{LATEST}"])
    result, events = await compact(summarizer)
    assert len(summarizer.calls) == 2
    info = summary_info(result[0]) or {}
    assert info["summarizer"] == "scripted" and "fallback_reason" not in info
    assert not [e for e in events if isinstance(e, SummarizerFallback)]


async def test_missing_sections_are_refused_and_the_required_ones_are_configurable() -> None:
    partial = f"{sections('Intent', 'Decisions')}\n{LATEST}"
    result, _ = await compact(Scripted([partial]))
    info = summary_info(result[0]) or {}
    assert info["summarizer"] == "deterministic" and "no '## Artifacts' section" in info["fallback_reason"]

    result, _ = await compact(Scripted([partial]), required_sections=("Intent", "Decisions"))
    assert (summary_info(result[0]) or {})["summarizer"] == "scripted"

    result, _ = await compact(Scripted([partial]), required_sections=("Open questions",))
    text = str((summary_part(result[0]) or TextPart("")).content)
    assert (summary_info(result[0]) or {})["summarizer"] == "deterministic"
    assert "## Open questions" in text  # the fallback always has every required heading


def test_required_sections_are_checked_at_construction() -> None:
    with pytest.raises(TypeError, match="required_sections"):
        SummarizationProcessor(None, required_sections="Intent")
    with pytest.raises(ValueError, match="required_sections"):
        ContextManagerMiddleware(summarization_model=None, required_sections=("Intent", " "))


async def test_touched_paths_the_summary_omits_are_appended() -> None:
    answer = f"{FULL}\n## Latest user request\n{LATEST}\nEdited `src/config/defaults.toml`."
    result, _ = await compact(Scripted([answer]))
    text = str((summary_part(result[0]) or TextPart("")).content)
    assert (summary_info(result[0]) or {})["summarizer"] == "scripted"
    assert text.startswith(answer)
    assert text.endswith("## Files touched\n- `src/config/loader.py`")


def test_touched_paths_come_from_tool_arguments() -> None:
    messages = [
        ModelResponse(parts=[ToolCallPart("edit", '{"file_path": "a/b.py", "content": "see docs/x.md"}')]),
        ModelResponse(parts=[ToolCallPart("bash", {"command": "pytest tests/test_app.py -q", "cwd": "."})]),
        ModelResponse(parts=[ToolCallPart("multi", {"paths": ["README.md", "src/m.py"], "url": "https://x.io/a"})]),
    ]
    assert touched_paths(messages) == ["a/b.py", "docs/x.md", "tests/test_app.py", "README.md", "src/m.py"]


def test_completion_adds_only_what_is_missing() -> None:
    complete = f"{FULL}\n{LATEST}\n`a/b.py`"
    assert (
        complete_summary(complete, required_sections=DEFAULT_REQUIRED_SECTIONS, latest_request=LATEST, paths=["a/b.py"])
        == complete
    )
    added = complete_summary("## Intent\nx", required_sections=("Intent", "Errors"), latest_request="do it", paths=[])
    assert added == "## Intent\nx\n\n## Errors\nnone\n\n## Latest user request\ndo it"


async def test_the_deterministic_summary_passes_the_checks_on_its_own() -> None:
    request = SummaryRequest(messages=history()[:-1], latest_user_request=LATEST)
    text = DeterministicSummarizer().summarize_sync(request)
    assert summary_problems(text, required_sections=DEFAULT_REQUIRED_SECTIONS, latest_request=LATEST) == []


class CheckingStore(JsonHistoryStore):
    """Checks, whenever a summary is appended, that every message it covers is already recorded; can fail
    the summary's append."""

    def __init__(self, path: Path, *, fail_summary: bool = False) -> None:
        super().__init__(path)
        self.fail_summary = fail_summary
        self.summaries = 0

    def append_sync(self, messages: Sequence[ModelMessage]) -> int:
        for message in messages:
            info = summary_info(message)
            if info is None:
                continue
            missing = [mid for mid in info["covers"] if mid not in self]
            assert not missing, f"the summary was written before the messages it replaces: {missing}"
            if self.fail_summary:
                raise OSError("disk full (injected)")
            self.summaries += 1
        return super().append_sync(messages)


def reading_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if any(isinstance(p, UserPromptPart) for p in messages[-1].parts):
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "src/app.py"})])
    return ModelResponse(parts=[TextPart(f"answered with {len(messages)} messages")])


def reading_agent(middleware: ContextManagerMiddleware, seen: list[int]) -> Agent[None, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(len(messages))
        return reading_model(messages, info)

    agent = Agent(FunctionModel(model), capabilities=[middleware])

    @agent.tool_plain
    def read_file(path: str) -> str:
        return f"# {path}\n" + "x = 1\n" * 150

    return agent


async def test_replaced_messages_are_archived_before_the_summary(tmp_path: Path) -> None:
    store = CheckingStore(tmp_path / "messages.json")
    middleware = ContextManagerMiddleware(max_tokens=1_200, summarization_model=None, history_store=store)
    seen: list[int] = []
    agent = reading_agent(middleware, seen)
    messages: list[ModelMessage] | None = None
    for i in range(5):
        messages = (await agent.run(f"Question {i}", message_history=messages)).all_messages()
    assert store.summaries == middleware.compression_count >= 1
    assert messages is not None and validate_history(messages, for_request=False) == []
    store.close()


async def test_a_failed_archive_write_aborts_the_compaction_and_leaves_the_history_as_it_was(tmp_path: Path) -> None:
    store = CheckingStore(tmp_path / "messages.json", fail_summary=True)
    events: list[ContextEvent] = []
    middleware = ContextManagerMiddleware(
        max_tokens=1_200, summarization_model=None, history_store=store, event_callback=events.append
    )
    seen: list[int] = []
    agent = reading_agent(middleware, seen)
    messages: list[ModelMessage] | None = None
    for i in range(5):
        messages = (await agent.run(f"Question {i}", message_history=messages)).all_messages()
    assert messages is not None
    failures = [e for e in events if isinstance(e, CompactionFailed)]
    assert failures and all("disk full" in e.error for e in failures)
    assert middleware.compression_count == 0 and store.summaries == 0
    assert seen == sorted(seen) and seen[-1] == len(messages) - 1  # nothing was ever cut from the requests
    assert not any(summary_part(m) for m in messages)
    assert [get_message_id(m) for m in messages] == [get_message_id(m) for m in await store.load()]
    store.close()


async def test_a_failed_archive_write_in_compact_returns_the_input_unchanged(tmp_path: Path) -> None:
    store = CheckingStore(tmp_path / "messages.json", fail_summary=True)
    middleware = ContextManagerMiddleware(summarization_model=None, history_store=store)
    before = history()
    result = await middleware.compact(before)
    assert len(result) == len(before) and all(a is b for a, b in zip(result, before, strict=True))
    store.close()
