"""The scripted coding session (`pydantic_deep.evals.CodingSession`): it plays through `create_deep_agent`, its
histories validate, its model records exactly what it received, and it has the shapes real coding agents make."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo

from pydantic_deep.agent import session_messages_path
from pydantic_deep.evals import CodingSession, CodingSessionResult
from summarization_pydantic_ai import ContextManagerMiddleware, is_summary_message

WINDOW = 32_000


def _spy(session: CodingSession) -> list[tuple[bytes, str | None, list[str]]]:
    """What the planner saw at each turn request, serialized at that moment (messages, instructions, tools)."""
    seen: list[tuple[bytes, str | None, list[str]]] = []
    plan = session.recorder.planner

    def spying(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tools = [t.name for t in info.function_tools]
        seen.append((ModelMessagesTypeAdapter.dump_json(messages), info.instructions, tools))
        return plan(messages, info)

    session.recorder.planner = spying
    return seen


Played = tuple[CodingSession, CodingSessionResult, list[tuple[bytes, str | None, list[str]]]]


@pytest.fixture(scope="module")
def managed() -> Played:
    """Two runs (66 turn requests) through the default stack with a 32,000-token window: it compacts."""
    session = CodingSession(runs=2)
    seen = _spy(session)
    middleware = ContextManagerMiddleware(messages_path=session_messages_path, max_tokens=WINDOW)
    return session, asyncio.run(session.run(context_manager=middleware)), seen


def test_the_session_runs_through_create_deep_agent_with_valid_histories(managed: Played) -> None:
    session, result, _ = managed
    assert len(result.turn_requests) == session.planned_requests > 60
    assert result.summary_requests >= 1, "a 32,000-token window compacts within two runs"
    assert any(is_summary_message(m) for r in result.turn_requests for m in r.messages)
    assert result.history_problems() == []
    probes = result.probes()
    assert probes["todo list"] and probes["last test result"]
    assert session.workspace is not None and not session.workspace.exists(), "the temporary workspace is removed"


def test_the_latest_user_request_survives_compaction(managed: Played) -> None:
    _, result, _ = managed
    assert result.probes()["latest user request"]


def test_the_recorded_requests_are_what_the_model_received(managed: Played) -> None:
    _, result, seen = managed
    turns = result.turn_requests
    assert len(turns) == len(seen)
    for record, (messages, instructions, tools) in zip(turns, seen, strict=True):
        assert ModelMessagesTypeAdapter.dump_json(record.messages) == messages
        assert record.instructions == instructions
        assert [t.name for t in record.tool_definitions] == tools
    assert {"read_file", "edit_file", "grep", "write_todos", "run_tests", "fetch_url"} <= set(seen[0][2])
    assert "## Todos" in (turns[0].instructions or "")
    stamps = [r.timestamp for r in result.requests]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


def test_the_session_has_the_shapes_of_a_coding_agent(managed: Played) -> None:
    _, result, _ = managed
    sent = result.turn_requests[0].messages  # the imported exchange opens the session
    calls = [p.tool_call_id for p in sent[1].parts if isinstance(p, ToolCallPart)]
    assert [p.tool_call_id for p in sent[2].parts if isinstance(p, ToolReturnPart)] == calls, "sent in call order"
    parts = [p for r in result.turn_requests for m in r.messages if isinstance(m, ModelRequest) for p in m.parts]
    outcomes = Counter((p.tool_name, p.outcome) for p in parts if isinstance(p, ToolReturnPart))
    assert outcomes[("edit_file", "failed")] and outcomes[("read_file", "failed")], "tool errors"
    assert outcomes[("run_tests", "retried")] and outcomes[("write_todos", "retried")], "retries asked by tools"
    fetched = [
        m
        for r in result.turn_requests
        for m in r.messages
        if isinstance(m, ModelRequest)
        if any(isinstance(p, ToolReturnPart) and p.tool_name == "fetch_url" for p in m.parts)
    ]
    documents = [p for m in fetched for p in m.parts if isinstance(p, UserPromptPart)]
    assert documents and all(len(str(p.content)) > 20_000 for p in documents), "a long document beside a result"


async def test_the_unmanaged_history_holds_out_of_order_results_and_superseded_reads() -> None:
    result = await CodingSession(runs=1).run(eviction=False, context_manager=False, cost_tracking=False)
    calls = [p.tool_call_id for p in result.messages[1].parts if isinstance(p, ToolCallPart)]
    returns = [p.tool_call_id for p in result.messages[2].parts if isinstance(p, ToolReturnPart)]
    assert sorted(calls) == sorted(returns) and calls != returns, "the stored parallel results are out of order"
    logs = [
        p
        for m in result.messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_name == "run_tests"
    ]
    assert max(len(str(p.content).splitlines()) for p in logs) > 2_000, "a whole-suite log of thousands of lines"
    order = [
        (p.tool_name, p.args_as_dict().get("path"))
        for m in result.messages
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    ]
    superseded = [
        path
        for i, (tool, path) in enumerate(order)
        if tool == "read_file" and ("edit_file", path) in order[:i] and ("read_file", path) in order[:i]
    ]
    assert len(superseded) >= 2
    assert len(result.turn_requests) == CodingSession(runs=1).planned_requests
    assert result.last_test_result is not None and "passed" in result.last_test_result


async def test_the_same_session_sends_the_same_requests_and_plays_once() -> None:
    sessions = [CodingSession(runs=1), CodingSession(runs=1)]
    first, second = [await s.run(eviction=False, context_manager=False, cost_tracking=False) for s in sessions]
    assert [_sent(r.messages) for r in first.requests] == [_sent(r.messages) for r in second.requests]
    assert [r.instructions for r in first.requests] == [r.instructions for r in second.requests]
    with pytest.raises(RuntimeError, match="plays once"):
        await sessions[0].run()


def _sent(messages: list[ModelMessage]) -> list[Any]:
    """What a provider is sent of each message (no timestamps, no ids)."""
    return [
        [
            (p.part_kind, getattr(p, "content", None), getattr(p, "args", None), getattr(p, "tool_call_id", None))
            for p in m.parts
        ]
        for m in messages
    ]


def test_a_session_checks_its_settings_and_plays_once() -> None:
    with pytest.raises(ValueError, match="runs must be between 1 and 6"):
        CodingSession(runs=0)
    assert CodingSession().planned_requests >= 160
    assert CodingSession().phases == ("rounding", "tax", "export", "webhooks", "fx", "release")
