"""Fault tier: concurrent sessions sharing one eviction backend, with retention pressing on the files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep.backends import BackendProtocol, LocalBackend, StateBackend
from pydantic_deep.eviction import EVICTION_METADATA_KEY, EvictionProcessor, RetentionPolicy

pytestmark = pytest.mark.faults

ROUNDS, SESSIONS, CALLS = 8, 3, 6


def _output(round_: int, session: int, call: int) -> str:
    line = f"round {round_} session {session} call {call} " + "0123456789" * 7 + "\n"
    return line * (100_000 // len(line))


def _agent(round_: int, session: int, processor: EvictionProcessor) -> Agent[None, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart("produce", {"n": n}, tool_call_id=f"call_{n}") for n in range(CALLS)]
            )
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[processor])

    @agent.tool_plain
    async def produce(n: int) -> str:
        await asyncio.sleep(0.0005 * ((n * 7 + session) % CALLS))
        return _output(round_, session, n)

    return agent


async def _next_turn(history: list[ModelMessage], processor: EvictionProcessor) -> list[ToolReturnPart]:
    """The tool outputs the model is sent on the session's next request."""
    seen: list[ToolReturnPart] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.extend(
            p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
        )
        return ModelResponse(parts=[TextPart("ok")])

    await Agent(FunctionModel(model), capabilities=[processor]).run("and now?", message_history=history)
    return seen


@pytest.mark.parametrize("kind", ["state", "local"])
async def test_concurrent_sessions_on_one_backend_each_read_back_their_own_outputs(kind: str, tmp_path: Path) -> None:
    """Every preview the model is sent reads back exactly its own output, or says that retention removed it."""
    backend: BackendProtocol = StateBackend() if kind == "state" else LocalBackend(tmp_path / "shared")
    # Retention presses hard (at most 4 files) while 18 outputs of a round are live in 3 histories.
    processor = EvictionProcessor(token_limit=1_000, backend=backend, retention=RetentionPolicy(max_files=4))
    wrong = unreadable = said_removed = read_back = 0
    for round_ in range(ROUNDS):
        results = await asyncio.gather(*(_agent(round_, s, processor).run("go") for s in range(SESSIONS)))
        sent = await asyncio.gather(*(_next_turn(r.all_messages(), processor) for r in results))
        for session, parts in enumerate(sent):
            assert len(parts) == CALLS
            for part in parts:
                info = part.metadata[EVICTION_METADATA_KEY]  # type: ignore[index]
                if info["state"] == "removed":
                    said_removed += "removed by the eviction retention policy" in str(part.content)
                    continue
                try:
                    saved = await backend.read(str(info["path"]))
                except FileNotFoundError:
                    unreadable += 1
                    continue
                read_back += 1
                wrong += saved != _output(round_, session, int(part.tool_call_id.removeprefix("call_")))
    assert read_back + said_removed == ROUNDS * SESSIONS * CALLS
    assert (wrong, unreadable) == (0, 0)
    assert read_back > 0 and said_removed > 0  # the limits did force removals, and they were announced
