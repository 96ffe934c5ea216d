"""History search under concurrency, edits and hostile input; usable as a toolset; its tool names checked up front."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

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

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.history_search import HistoryArchiveSearch, QueryError
from summarization_pydantic_ai import ContextManagerMiddleware, JsonHistoryStore, ensure_message_id, get_message_id
from summarization_pydantic_ai.store import RecordBatch, StoredRecord
from summarization_pydantic_ai.store import _fts_index as fts_index_module


def _messages(texts: list[str]) -> list[ModelMessage]:
    messages: list[ModelMessage] = [
        ModelResponse(parts=[TextPart(text)]) if i % 2 else ModelRequest(parts=[UserPromptPart(text)])
        for i, text in enumerate(texts)
    ]
    for message in messages:
        ensure_message_id(message)
    return messages


def _append(path: Path, messages: list[ModelMessage]) -> None:
    store = JsonHistoryStore.open(path)
    try:
        store.append_sync(messages)
    finally:
        store.close()


def _rows(path: Path) -> tuple[int, int]:
    """(rows, distinct message ids) in the index file of `path`, read with SQLite directly."""
    db = sqlite3.connect(path.with_name(path.name + ".index.sqlite"))
    try:
        rows, distinct = db.execute("SELECT COUNT(*), COUNT(DISTINCT message_id) FROM docs").fetchone()
        return int(rows), int(distinct)
    finally:
        db.close()


# -- concurrency -----------------------------------------------------------------------------------------------------


async def test_eight_concurrent_searches_on_a_fresh_index_index_each_message_once(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    _append(path, _messages([f"message number{i} about topic" for i in range(1_000)]))
    shared = HistoryArchiveSearch(messages_path=path)
    searches = [shared, shared, shared, shared] + [HistoryArchiveSearch(messages_path=path) for _ in range(4)]
    results = await asyncio.gather(*(s.search(f"number{i * 100}") for i, s in enumerate(searches)))
    assert [r.total_shown for r in results] == [1] * 8
    assert _rows(path) == (1_000, 1_000)
    assert shared.index_for(path).indexed_records() == 1_000


def test_eight_threads_searching_a_fresh_index_index_each_message_once(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    _append(path, _messages([f"message number{i} about topic" for i in range(1_000)]))
    shown: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(i: int) -> None:
        try:
            search = HistoryArchiveSearch(messages_path=path)
            start.wait()
            shown.append(asyncio.run(search.search(f"number{i * 100}")).total_shown)
            search.index_for(path).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert shown == [1] * 8
    assert _rows(path) == (1_000, 1_000)


# -- edits -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("grow", [True, False], ids=["longer", "shorter"])
async def test_a_rewritten_history_is_reindexed_and_later_appends_are_found(tmp_path: Path, grow: bool) -> None:
    path = tmp_path / "messages.json"
    original = _messages(["first words", "the deploy window is monday", "third words"])
    _append(path, original)
    search = HistoryArchiveSearch(messages_path=path)
    assert (await search.search("monday")).total_shown == 1
    # The file is rewritten (same first record, the second one edited: the file changes length), then grows.
    edited = ModelResponse(
        parts=[TextPart("the deploy window is thursday" + (" after the freeze, not before it" if grow else ""))]
    )
    edited.metadata = original[1].metadata
    path.unlink()
    _append(path, [original[0], edited, original[2]])
    _append(path, _messages(["appended afterwards: zebra"]))
    assert (await search.search("thursday")).total_shown == 1
    assert (await search.search("monday")).total_shown == 0
    assert (await search.search("zebra")).total_shown == 1
    assert search.index_for(path).indexed_records() == 4


async def test_a_new_version_of_a_message_replaces_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's contract: a record whose id was seen before is a newer version of that message. Versions are
    injected through `read_records` here, whatever the store's on-disk format."""
    path = tmp_path / "messages.json"
    original = _messages(["first words", "the deploy window is monday", "third words"])
    _append(path, original)
    search = HistoryArchiveSearch(messages_path=path)
    assert (await search.search("monday")).total_shown == 1
    edited = ModelResponse(parts=[TextPart("the deploy window is thursday")])
    edited.metadata = original[1].metadata
    real = fts_index_module.read_records
    injected = {"done": False}

    def read_records_with_a_version(file: Any, start: int = 0) -> RecordBatch:
        batch = real(file, start)
        if injected["done"] or start == 0:
            return batch
        injected["done"] = True
        version = StoredRecord(batch.next_offset, get_message_id(edited), edited, False)
        return RecordBatch([*batch.records, version], batch.next_offset, batch.first_message_id)

    monkeypatch.setattr(fts_index_module, "read_records", read_records_with_a_version)
    _append(path, _messages(["appended next: walrus"]))
    assert (await search.search("thursday")).total_shown == 1
    assert (await search.search("monday")).total_shown == 0
    assert (await search.search("walrus")).total_shown == 1
    _append(path, _messages(["appended after the edit: zebra"]))
    assert (await search.search("zebra")).total_shown == 1
    assert search.index_for(path).indexed_records() == 5
    hit = (await search.search("thursday")).hits[0]
    assert hit.position == 1  # the edited message keeps its place


async def test_an_edit_recorded_through_the_store_is_found_by_its_new_text(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    original = _messages(["first words", "the deploy window is monday"])
    _append(path, original)
    search = HistoryArchiveSearch(messages_path=path)
    assert (await search.search("monday")).total_shown == 1
    edited = ModelResponse(parts=[TextPart("the deploy window is thursday")])
    edited.metadata = original[1].metadata
    _append(path, [edited])  # the store records a new version of the message (same id)
    assert (await search.search("thursday")).total_shown == 1
    assert (await search.search("monday")).total_shown == 0
    _append(path, _messages(["later: zebra"]))
    assert (await search.search("zebra")).total_shown == 1
    assert search.index_for(path).indexed_records() == 3  # an edit is never a second row


# -- session ids -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("session", ["..", ".", "../outside", "a/../..", "x\x00y", "é" * 200])
async def test_a_session_argument_never_reaches_outside_sessions_dir(tmp_path: Path, session: str) -> None:
    sessions = tmp_path / "sessions"
    _append(sessions / "a" / "messages.json", _messages(["inside words"]))
    _append(tmp_path / "messages.json", _messages(["secret outside words"]))
    search = HistoryArchiveSearch(messages_path=sessions / "a" / "messages.json", sessions_dir=sessions)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(QueryError, match="invalid session id"):
        await search.search("secret", session=session)
    assert sorted(tmp_path.iterdir()) == before  # nothing read or written outside sessions_dir (no index there)


async def test_the_tool_answers_a_bad_session_with_a_message_the_model_can_act_on(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    _append(sessions / "a" / "messages.json", _messages(["inside words"]))
    _append(tmp_path / "messages.json", _messages(["secret outside words"]))
    search = HistoryArchiveSearch(messages_path=sessions / "a" / "messages.json", sessions_dir=sessions)
    output = await _call_search_tool(search, {"query": "secret", "session": ".."})
    assert output.startswith("Search not run: invalid session id")
    assert "secret" not in output.split(":", 1)[1].replace("'secret'", "")
    no_dir = HistoryArchiveSearch(messages_path=sessions / "a" / "messages.json")
    assert "no sessions_dir" in await _call_search_tool(no_dir, {"query": "inside", "session": "b"})


# -- a toolset like the others ---------------------------------------------------------------------------------------


async def _call_search_tool(toolset: Any, args: dict[str, Any]) -> str:
    outputs: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            outputs.append(str(returns[0].content))
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("search_conversation_history", args)])

    await Agent(FunctionModel(model), toolsets=[toolset]).run("search")
    return outputs[0]


async def test_the_search_object_is_a_toolset(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    _append(path, _messages(["the staging password rotates every 17 days", "noted"]))
    search = HistoryArchiveSearch(messages_path=path)
    direct = await _call_search_tool(search, {"query": "rotates"})
    assert direct.startswith("Matches for 'rotates'") and "17 days" in direct
    assert await _call_search_tool(search.toolset(), {"query": "rotates"}) == direct  # `.toolset()` still works


# -- tool names checked at construction ------------------------------------------------------------------------------


def test_two_read_history_tools_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"'read_history'.*expose_history_tool=True.*history search") as info:
        create_deep_agent(
            FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("x")])),
            history_search=True,
            context_manager=ContextManagerMiddleware(expose_history_tool=True),
        )
    assert "expose_history_tool=False" in str(info.value) and "read_history_tool=False" in str(info.value)
    with pytest.raises(ValueError, match="'search_conversation_history'"):
        create_deep_agent(history_search=True, toolsets=[HistoryArchiveSearch()])


async def test_the_suggested_resolution_runs_with_one_read_history(tmp_path: Path) -> None:
    fact = _messages(["Deploys happen on Tuesdays at 14:00 UTC."])
    calls: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        names = [t.name for t in info.function_tools]
        assert names.count("read_history") == 1
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            calls.append(str(returns[0].content))
            return ModelResponse(parts=[TextPart("Tuesdays")])
        return ModelResponse(parts=[ToolCallPart("read_history", {"start_id": get_message_id(fact[0])})])

    middleware = ContextManagerMiddleware(
        summarization_model=None, expose_history_tool=False, messages_path=lambda ctx: ctx.deps.messages_path
    )
    agent = create_deep_agent(FunctionModel(model), history_search=True, context_manager=middleware)
    deps = DeepAgentDeps(base_dir=tmp_path, session_id="s")
    assert deps.messages_path is not None
    _append(Path(deps.messages_path), fact)
    assert (await agent.run("When do deploys happen?", deps=deps)).output == "Tuesdays"
    assert "Tuesdays at 14:00 UTC" in calls[0]


async def test_the_middleware_can_provide_read_history_for_the_search(tmp_path: Path) -> None:
    fact = _messages(["Deploys happen on Tuesdays at 14:00 UTC."])
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        names = sorted(t.name for t in info.function_tools if t.name in ("read_history", "search_conversation_history"))
        assert names == ["read_history", "search_conversation_history"]
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("search_conversation_history", {"query": "tuesdays"})])
        seen.append(str(returns[0].content))
        if returns[0].tool_name == "search_conversation_history":
            message_id = seen[-1].split("message id ")[1].split()[0]
            return ModelResponse(parts=[ToolCallPart("read_history", {"start_id": message_id, "end_id": message_id})])
        return ModelResponse(parts=[TextPart("Tuesdays")])

    middleware = ContextManagerMiddleware(
        summarization_model=None, expose_history_tool=True, messages_path=lambda ctx: ctx.deps.messages_path
    )
    search = HistoryArchiveSearch(read_history_tool=False)
    agent = create_deep_agent(FunctionModel(model), history_search=search, context_manager=middleware)
    deps = DeepAgentDeps(base_dir=tmp_path, session_id="s")
    assert deps.messages_path is not None
    _append(Path(deps.messages_path), fact)
    assert (await agent.run("When do deploys happen?", deps=deps)).output == "Tuesdays"
    assert "Tuesdays at 14:00 UTC" in seen[-1]
