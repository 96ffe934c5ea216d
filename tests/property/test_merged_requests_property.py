"""Property: a recorded history that pydantic-ai merged at a run's start is restored to the recorded requests.

Any valid history, with a few failed turns after it (unanswered prompts, each recorded), goes through
`repair_messages` (what pydantic-ai does to a run's `message_history`): consecutive requests become one request
without our ids. The middleware gives back the recorded history exactly (same messages, same ids, valid), and
records nothing again.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pydantic_ai.models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart, repair_messages
from strategies import histories

from summarization_pydantic_ai import ContextManagerMiddleware, ensure_message_id, get_message_id, validate_history

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))


async def _restore(history: list[ModelMessage], path: Path) -> None:
    middleware = ContextManagerMiddleware(max_tokens=10_000_000, summarization_model=None, messages_path=path)
    store = middleware.store
    assert store is not None
    await store.append(history)
    merged = repair_messages(history)
    restored = await middleware(merged)
    assert [get_message_id(m) for m in restored] == [get_message_id(m) for m in history]
    assert restored == history
    assert validate_history(restored) == []
    assert len(store) == len(history)  # nothing recorded twice


@settings(max_examples=int(300 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(for_request=True), failed=st.integers(0, 3))
def test_merged_requests_are_split_back_into_the_recorded_ones(history: list[ModelMessage], failed: int) -> None:
    history = [*history, *(ModelRequest(parts=[UserPromptPart(f"failed turn {i}")]) for i in range(failed))]
    for message in history:
        ensure_message_id(message)
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_restore(history, Path(directory) / "messages.json"))
