"""Fault injection: the middleware's recording when the disk is full (ENOSPC) at random appends.

A failed append fails the request (the error reaches the caller); the run is retried with the same history (the
first run of a conversation is not disturbed: retrying it without a history is refused as another conversation).
Every message of the final history must be in messages.json exactly once and in order, whatever failed; the
messages of a failed attempt that had been appended stay in the file (acknowledged records are never removed).
"""

from __future__ import annotations

import errno
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import ContextManagerMiddleware, JsonHistoryStore, get_message_id

pytestmark = pytest.mark.faults
_figures: list[tuple[int, int, int, int, int]] = []
"""(appends tried, appends failed, runs failed, final history, records): read them with a debugger or -s."""

RUNS = 40
SEEDS = 5
FAILURE_RATE = 0.3


class DiskFullStore(JsonHistoryStore):
    """A messages.json store whose appends fail with ENOSPC at random, before writing anything."""

    def __init__(self, path: Path, rng: random.Random) -> None:
        super().__init__(path)
        self.rng = rng
        self.armed = False
        self.failures = 0
        self.attempts = 0

    def append_sync(self, messages: Sequence[ModelMessage]) -> int:
        self.attempts += 1
        if self.armed and self.rng.random() < FAILURE_RATE:
            self.failures += 1
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        return super().append_sync(messages)


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) % 4 == 1:
        return ModelResponse(parts=[ToolCallPart("lookup", {"n": len(messages)})])
    return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])


@pytest.mark.parametrize("seed", range(SEEDS))
async def test_disk_full_on_append_loses_nothing_and_duplicates_nothing(tmp_path: Path, seed: int) -> None:
    store = DiskFullStore(tmp_path / "messages.json", random.Random(seed))
    middleware = ContextManagerMiddleware(max_tokens=100_000, summarization_model=None, history_store=store)
    agent = Agent(FunctionModel(scripted), capabilities=[middleware])

    @agent.tool_plain
    def lookup(n: int) -> str:
        return f"value {n}"

    history: list[ModelMessage] | None = None
    failed_runs = 0
    for i in range(RUNS):
        while True:
            try:
                history = (await agent.run(f"question {i}", message_history=history)).all_messages()
                store.armed = True
                break
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                failed_runs += 1  # the caller retries the same turn with the same history
    assert history is not None
    store.armed = False  # the disk has room again: the last run's final answer is recorded
    await middleware(history)

    records = ModelMessagesTypeAdapter.validate_json((tmp_path / "messages.json").read_bytes())
    recorded_ids = [get_message_id(m) for m in records]
    assert len(recorded_ids) == len(set(recorded_ids)), "a message was recorded twice"
    remaining = iter(recorded_ids)
    assert all(get_message_id(m) in remaining for m in history), "a message was lost or recorded out of order"
    _figures.append((store.attempts, store.failures, failed_runs, len(history), len(recorded_ids)))
    assert store.failures > 0 and failed_runs > 0
    store.close()
