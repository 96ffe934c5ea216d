"""`PhaseCheckpoints` in detail: the plain form, what the current phase keeps, bad input, failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
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
    ContextEvent,
    HistoryStore,
    JsonHistoryStore,
    PhaseCheckpointed,
    PhaseCheckpoints,
    get_message_id,
    summary_info,
    validate_history,
)

FLIGHTS = "\n".join(f"SK{100 + i} at {6 + i}:00, {90 + 10 * i} EUR, {i % 2} stop(s)" for i in range(12))


def history() -> list[ModelMessage]:
    return [
        ModelRequest(parts=[SystemPromptPart("Be brief."), UserPromptPart("Plan a trip")]),
        ModelResponse(parts=[ToolCallPart("search_flights", {"to": "Oslo"}, "f1")]),
        ModelRequest(parts=[ToolReturnPart("search_flights", FLIGHTS, "f1")]),
        ModelResponse(parts=[TextPart("Booked SK123.")]),
        ModelRequest(parts=[UserPromptPart("Now find a hotel")]),
    ]


async def test_plain_form_keeps_the_new_prompt_and_archives_in_memory() -> None:
    messages = history()
    events: list[ContextEvent] = []
    phases = PhaseCheckpoints(event_callback=events.append)
    assert await phases(messages) is messages  # nothing marked done: unchanged

    phases.mark_done("flights", state={"flight": "SK123"}, objectives=["book a flight"])
    assert [p.name for p in phases.pending] == ["flights"]
    result = await phases(messages)

    assert validate_history(result) == []
    [checkpoint] = result
    assert [type(p) for p in checkpoint.parts] == [SystemPromptPart, UserPromptPart, CompactionPart, UserPromptPart]
    assert checkpoint.parts[-1].content == "Now find a hotel"  # type: ignore[union-attr]
    info = summary_info(checkpoint)
    assert info is not None and info["kind"] == "phase_checkpoint" and info["instruction_parts"] == 2
    assert phases.pending == () and [p.name for p in phases.completed] == ["flights"]
    page = await phases.read_phase("flights")
    assert page.messages == messages[1:4] and page.total == 3 and page.next_offset is None
    [event] = [e for e in events if isinstance(e, PhaseCheckpointed)]
    assert event.archived_messages == 3 and event.checkpoint_id == get_message_id(checkpoint)

    # A second phase builds on the first checkpoint: the original instructions stay, the old prompt is archived.
    later = [*result, ModelResponse(parts=[TextPart("Hotel Bristol booked.")])]
    later.append(ModelRequest(parts=[UserPromptPart("Summarize the trip")]))
    phases.mark_done("hotel", state="Hotel Bristol")
    [second] = await phases(later)
    parts = second.parts
    assert [getattr(p, "content", None) for p in parts[:2]] == ["Be brief.", "Plan a trip"]
    text = str(parts[2].content)  # type: ignore[union-attr]
    assert "Completed phases: flights, hotel." in text and "State: Hotel Bristol" in text
    assert "Now find a hotel" not in str([p.content for p in parts])  # type: ignore[union-attr]
    assert parts[-1].content == "Summarize the trip"  # type: ignore[union-attr]
    assert info["covers"] and summary_info(second)["replaces_summaries"] == [get_message_id(checkpoint)]  # type: ignore[index]


async def test_a_pending_exchange_of_other_tools_stays_with_the_current_phase() -> None:
    messages = [
        history()[0],
        ModelResponse(parts=[TextPart("Checking the dates first. " * 20)]),
        ModelRequest(parts=[UserPromptPart("Leave on Friday")]),
        *history()[1:3],  # the search call's result is what the next request answers
    ]
    phases = PhaseCheckpoints()
    phases.mark_done("setup")
    result = await phases(messages)
    assert validate_history(result) == []
    assert result[1:] == messages[3:]  # the in-flight exchange is kept whole
    assert await phases.read_phase("setup") is not None


async def test_a_checkpoint_applied_later_keeps_the_step_that_completed_the_phase() -> None:
    """The model ran the tests and marked the phase done in one step; the checkpoint waited (a cost policy) while
    the next phase began. The step with the test result stays after the checkpoint, with the current exchange."""
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Fix the rounding bug, then tidy the docs")]),
        ModelResponse(parts=[ToolCallPart("edit_file", {"path": "money.py"}, "e1")]),
        ModelRequest(parts=[ToolReturnPart("edit_file", "Edited money.py", "e1")]),
        ModelResponse(
            parts=[
                ToolCallPart("run_tests", {}, "t1"),
                ToolCallPart("complete_phase", {"name": "fix", "state": {"bug": "fixed"}}, "c1"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("run_tests", "==== 1664 passed in 27.37s ====", "t1"),
                ToolReturnPart("complete_phase", "Phase 'fix' marked done.", "c1"),
            ]
        ),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": "README.md"}, "r1")]),
        ModelRequest(parts=[ToolReturnPart("read_file", "# ledger", "r1")]),
        ModelResponse(parts=[ToolCallPart("grep", {"pattern": "TODO"}, "g1")]),
        ModelRequest(parts=[ToolReturnPart("grep", "docs/index.md:3: TODO", "g1")]),
    ]
    phases = PhaseCheckpoints()
    phases.mark_done("fix", state={"bug": "fixed"})
    result = await phases(messages)

    assert validate_history(result) == []
    assert result[1:] == [*messages[3:5], *messages[7:]]  # the closing step, then the current exchange
    assert "Completed phases: fix." in str(result[0].parts[-1].content)  # type: ignore[union-attr]
    assert (await phases.read_phase("fix")).messages == [*messages[1:3], *messages[5:7]]


async def test_a_later_checkpoint_archives_a_step_that_only_completed_the_phase() -> None:
    messages = history()[:4]
    messages += [
        ModelResponse(parts=[ToolCallPart("complete_phase", {"name": "flights"}, "c1")]),
        ModelRequest(parts=[ToolReturnPart("complete_phase", "Phase 'flights' marked done.", "c1")]),
        ModelResponse(parts=[ToolCallPart("search_hotels", {"in": "Oslo"}, "h1")]),
        ModelRequest(parts=[ToolReturnPart("search_hotels", "Hotel Bristol", "h1")]),
    ]
    phases = PhaseCheckpoints()
    phases.mark_done("flights")
    result = await phases(messages)
    assert validate_history(result) == []
    assert result[1:] == messages[6:]  # the phase tool's own exchange went with the phase it closed


async def test_a_checkpoint_that_would_grow_the_context_waits_for_the_next_phase() -> None:
    messages = [
        ModelRequest(parts=[UserPromptPart("Plan a trip")]),
        ModelResponse(parts=[TextPart("Where to?")]),
        ModelRequest(parts=[UserPromptPart("Oslo")]),
    ]
    events: list[ContextEvent] = []
    phases = PhaseCheckpoints(event_callback=events.append)
    phases.mark_done("setup", state={"destination": "Oslo"}, objectives=["pick a destination"])
    assert await phases(messages) is messages  # the checkpoint is larger than the two short messages it replaces
    assert [p.name for p in phases.pending] == ["setup"] and not events
    longer = [*messages, ModelResponse(parts=[TextPart("Found flights. " + FLIGHTS)])]
    longer.append(ModelRequest(parts=[UserPromptPart("Book the cheapest")]))
    assert await phases(longer) is longer  # not retried at every request: it waits for the next phase
    phases.mark_done("flights", state={"flight": "SK100"})
    [checkpoint] = await phases(longer)
    assert "Completed phases: setup, flights." in str(checkpoint.parts[-2].content)  # type: ignore[union-attr]
    assert phases.pending == () and [e.phases for e in events if isinstance(e, PhaseCheckpointed)] == [
        ("setup", "flights")
    ]


def test_mark_done_refuses_bad_input() -> None:
    phases = PhaseCheckpoints(phases=["login", "cart"])
    with pytest.raises(ValueError, match="unknown phase 'pay'"):
        phases.mark_done("pay")
    with pytest.raises(ValueError, match="non-empty"):
        phases.mark_done("  ")
    with pytest.raises(TypeError, match="JSON"):
        phases.mark_done("login", state={"when": object()})
    with pytest.raises(TypeError, match="objectives"):
        phases.mark_done("login", objectives="log in")
    phases.mark_done("login")
    with pytest.raises(ValueError, match="already marked done"):
        phases.mark_done("login")
    with pytest.raises(TypeError, match="not a string"):
        PhaseCheckpoints(phases="login")
    with pytest.raises(ValueError, match="unique"):
        PhaseCheckpoints(phases=["a", "a"])
    with pytest.raises(ValueError, match="tool_name"):
        PhaseCheckpoints(tool_name="complete phase")


async def test_read_phase_of_an_unknown_phase_says_which_exist() -> None:
    with pytest.raises(ValueError, match="no completed phase named 'x'"):
        await PhaseCheckpoints().read_phase("x")


async def test_the_tool_turns_bad_input_into_a_retry_and_stays_off_when_disabled() -> None:
    calls: list[dict[str, Any]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert [t.name for t in info.function_tools] == ["complete_phase"]
        retried = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if retried:
            assert retried[0].outcome == "retried"
            return ModelResponse(parts=[TextPart(retried[0].model_response_str())])
        calls.append({"name": "pay"})
        return ModelResponse(parts=[ToolCallPart("complete_phase", {"name": "pay"}, "p1")])

    phases = PhaseCheckpoints(phases=["login"])
    result = await Agent(FunctionModel(model), capabilities=[phases]).run("go")
    assert "unknown phase 'pay'" in result.output and phases.pending == ()

    def no_tools(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert info.function_tools == []
        return ModelResponse(parts=[TextPart("ok")])

    await Agent(FunctionModel(no_tools), capabilities=[PhaseCheckpoints(expose_tool=False)]).run("go")


class BrokenStore:
    """A store whose writes fail (a full disk)."""

    def __init__(self, inner: HistoryStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self.inner

    def __len__(self) -> int:
        return len(self.inner)

    async def append(self, messages: Any) -> int:
        raise OSError("No space left on device")


async def test_a_failing_store_leaves_the_history_and_the_phase_pending(tmp_path: Path) -> None:
    store = BrokenStore(JsonHistoryStore.open(tmp_path / "messages.json"))
    phases = PhaseCheckpoints(history_store=store)  # type: ignore[arg-type]
    messages = history()
    phases.mark_done("flights")
    assert await phases(messages) is messages
    assert [p.name for p in phases.pending] == ["flights"]


async def test_a_store_per_run(tmp_path: Path) -> None:
    stores: dict[str, JsonHistoryStore] = {}

    def store_for(ctx: Any) -> JsonHistoryStore:
        return stores.setdefault("s", JsonHistoryStore.open(tmp_path / "s" / "messages.json"))

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, CompactionPart) for p in messages[-1].parts):  # the checkpoint replaced the exchange
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("complete_phase", {"name": "only"}, "c1")])

    phases = PhaseCheckpoints(history_store=store_for)
    await Agent(FunctionModel(model), capabilities=[phases]).run("go")
    page = await phases.read_phase("only")
    assert [m.kind for m in page.messages] == ["response", "request"]
    with pytest.raises(TypeError, match="run context"):
        await phases(history())
