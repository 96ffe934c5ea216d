"""Property: a history cut at any message id (`history_until`, `fork`) is a valid history, or refused with
`ForkPointError` when the cut would split tool calls from their results."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pydantic_ai.models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from strategies import histories

from pydantic_deep import ForkPointError, SessionManager
from pydantic_deep.sessions._history import cut_records, history_at, history_in_records, records_until
from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    JsonHistoryStore,
    ensure_message_id,
    get_message_id,
    is_summary_message,
    validate_history,
    working_context,
)

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))


def ids(messages: list[ModelMessage]) -> list[str | None]:
    return [get_message_id(m) for m in messages]


def has_user_turn(messages: list[ModelMessage]) -> bool:
    return any(
        isinstance(m, ModelRequest) and any(not isinstance(p, SystemPromptPart | CompactionPart) for p in m.parts)
        for m in messages
    )


def record(base: Path, messages: list[ModelMessage]) -> SessionManager:
    sessions = SessionManager(base)
    info = sessions.create("s")
    for message in messages:
        ensure_message_id(message)
    store = JsonHistoryStore(info.messages_path)
    store.append_sync(messages)
    store.close()
    return sessions


@settings(max_examples=int(100 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=histories(for_request=False, summaries=True), data=st.data())
def test_a_cut_at_any_message_is_valid_or_refused(
    tmp_path: Path, messages: list[ModelMessage], data: st.DataObject
) -> None:
    sessions = record(tmp_path / uuid.uuid4().hex, messages)
    at = data.draw(st.integers(0, len(messages) - 1), label="cut index")
    point = get_message_id(messages[at])
    assert point is not None

    async def cut() -> tuple[list[ModelMessage], list[ModelMessage]]:
        history = await sessions.history_until("s", point)
        fork = await sessions.fork("s", point)
        return history, await sessions.resume(fork.id)

    message = messages[at]
    splits_exchange = isinstance(message, ModelResponse) and any(isinstance(p, ToolCallPart) for p in message.parts)
    try:
        history, forked = asyncio.run(cut())
    except ForkPointError:
        assert splits_exchange or not has_user_turn(messages[: at + 1])
        assert [s.id for s in sessions.list()] == ["s"], "a refused fork leaves nothing behind"
        return
    assert not splits_exchange
    assert ids(forked) == ids(history), "the fork resumes to the history at the point"
    if any(is_summary_message(m) for m in messages[: at + 1]):
        # Generated summaries carry no lineage (which ids a compaction kept): the working context is then the
        # store's rule for summaries written by others, checked here for agreement with load(); cuts of real
        # compactions are the next test's.
        store = JsonHistoryStore.reader(sessions.get("s").messages_path)
        assert ids(working_context(store.load_all_sync())) == ids(store.load_sync())
        store.close()
        return
    assert ids(history) == ids(messages[: at + 1])
    assert validate_history(history, for_request=False) == []


@settings(max_examples=int(60 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=histories(for_request=True, summaries=False), turns=st.integers(0, 3), data=st.data())
def test_the_history_at_a_point_after_a_real_compaction(
    tmp_path: Path, messages: list[ModelMessage], turns: int, data: st.DataObject
) -> None:
    """A compaction by `ContextManagerMiddleware` (summary lineage recorded), then more turns: the history at any
    point read from the working context (the fast path) is the one read from every record up to it."""
    base = tmp_path / uuid.uuid4().hex
    path = base / "sessions" / "s" / "messages.json"
    middleware = ContextManagerMiddleware(summarization_model=None, messages_path=path, max_tokens=100_000)

    async def session() -> list[ModelMessage]:
        working = await middleware.compact(messages)
        for n in range(turns):
            working += [ModelResponse(parts=[TextPart(f"answer {n}")]), ModelRequest(parts=[UserPromptPart(f"q{n}")])]
            for message in working:
                ensure_message_id(message)
            await middleware.store.append(working)  # type: ignore[union-attr]
        return working

    asyncio.run(session())
    middleware.store.close()  # type: ignore[union-attr]
    every = JsonHistoryStore.reader(path).load_all_sync()
    point = get_message_id(data.draw(st.sampled_from(every), label="point"))
    assert point is not None
    try:
        slow = working_context(records_until(path, point))
    except ForkPointError:
        return
    assert ids(history_at(path, point)) == ids(slow)
    assert validate_history(slow, for_request=False) == []


@settings(max_examples=int(100 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=histories(for_request=False, summaries=True), data=st.data())
def test_a_cut_of_records_in_memory_is_the_cut_of_the_file(
    tmp_path: Path, messages: list[ModelMessage], data: st.DataObject
) -> None:
    """A database session is cut from its records in memory (`cut_records`, `history_in_records`): the same history,
    or the same refusal, as the cut of the same records in a messages.json (`records_until`, `history_at`)."""
    path = record(tmp_path / uuid.uuid4().hex, messages).get("s").messages_path
    records = JsonHistoryStore.reader(path).load_all_sync()
    point = get_message_id(data.draw(st.sampled_from(records), label="point"))
    assert point is not None

    def outcome(cut: Callable[[], list[ModelMessage]]) -> list[str | None] | str:
        try:
            return ids(cut())
        except ForkPointError as exc:
            return f"refused: {str(exc).split(' of ', 1)[0]}"  # the same message, bar where the history is

    assert outcome(lambda: cut_records(records, point, "db")) == outcome(lambda: records_until(path, point))
    in_memory = outcome(lambda: history_in_records(records, point, "db"))
    assert in_memory == outcome(lambda: history_at(path, point))
    before = records[: [get_message_id(m) for m in records].index(point) + 1]
    if not isinstance(in_memory, str) and not any(is_summary_message(m) for m in before):
        # (generated summaries carry no lineage: validity after them is the previous tests' subject)
        assert validate_history(history_in_records(records, point, "db"), for_request=False) == []
