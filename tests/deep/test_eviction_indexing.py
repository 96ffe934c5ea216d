"""EvictedOutputIndexer: an evicted output's full text is searchable with its preview's message, indexed once."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.eviction import EvictedOutputIndexer, EvictionProcessor
from pydantic_deep.storage import open_storage
from summarization_pydantic_ai import ContextManagerMiddleware, get_message_id
from summarization_pydantic_ai.store import SearchableHistoryStore, SQLiteHistoryStore, open_database


def _report() -> str:
    lines = [f"row {i}: value {i * 3}" for i in range(5_000)]
    lines[4_800] = "row 4800: quokkaflag raised"
    return "\n".join(lines)


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Each new prompt calls the report tool; its result gets an answer."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    if any(p.part_kind == "user-prompt" for p in last.parts):
        return ModelResponse([ToolCallPart("report", {}, tool_call_id=f"r{len(messages)}")])
    return ModelResponse([TextPart("read it")])


def report() -> str:
    """The report."""
    return _report()


def _agent(url: str) -> Agent[DeepAgentDeps, str]:
    agent = create_deep_agent(FunctionModel(_script), store=url)
    agent.tool_plain(report)
    return agent


def _holders(messages: list[ModelMessage]) -> list[str | None]:
    """The ids of the messages holding an evicted output's preview."""
    return [
        get_message_id(m)
        for m in messages
        if any(isinstance(p, ToolReturnPart) and "pydantic_deep.eviction" in (p.metadata or {}) for p in m.parts)
    ]


async def test_a_resumed_session_is_not_indexed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    calls: list[str] = []
    original = SQLiteHistoryStore.add_search_text

    async def counting(self: SQLiteHistoryStore, message_id: str, text: str) -> None:
        calls.append(message_id)
        await original(self, message_id, text)

    monkeypatch.setattr(SQLiteHistoryStore, "add_search_text", counting)
    deps = DeepAgentDeps(session_id="s", base_dir=tmp_path / "base")
    first = await _agent(url).run("report please", deps=deps)
    assert calls == _holders(first.all_messages()) and len(calls) == 1

    storage = open_storage(url)  # another process: a new agent resumes the session from the database
    history = await storage.history.session("s").load()
    second = await _agent(url).run("and again", deps=deps, message_history=history)
    assert calls == _holders(second.all_messages())  # only the new output: the first is not read again
    assert len(calls) == 2
    hits = await storage.history.session("s").search("quokkaflag")
    assert sorted(h.message_id for h in hits) == sorted(calls)
    await storage.close()


async def test_a_preview_recorded_without_the_indexer_is_indexed_at_the_next_run(tmp_path: Path) -> None:
    """E.g. a session recorded before the indexer existed, or a cancelled turn the chat recorded itself."""
    database = open_database(f"sqlite:///{tmp_path / 'h.db'}")
    store = database.session("s")
    evictor = EvictionProcessor(token_limit=2_000)
    middleware = ContextManagerMiddleware(max_tokens=1_000_000, summarization_model=None, history_store=store)
    plain = Agent(FunctionModel(_script), deps_type=DeepAgentDeps, capabilities=[evictor, middleware])
    plain.tool_plain(report)
    deps = DeepAgentDeps(session_id="s", base_dir=tmp_path / "base")
    first = await plain.run("report please", deps=deps)
    assert await store.search_texts() == {}  # nothing indexed it

    indexer = EvictedOutputIndexer(middleware=middleware, eviction=evictor)
    indexed = Agent(FunctionModel(_script), deps_type=DeepAgentDeps, capabilities=[evictor, middleware, indexer])
    indexed.tool_plain(report)
    second = await indexed.run("and again", deps=deps, message_history=first.all_messages())
    holders = _holders(second.all_messages())
    assert len(holders) == 2 and sorted(await store.search_texts()) == sorted(holders)  # type: ignore[arg-type]
    assert isinstance(store, SearchableHistoryStore)
    assert {h.message_id for h in await store.search("quokkaflag")} == set(holders)
    await database.close()


async def test_the_default_file_layout_indexes_with_the_session_file(tmp_path: Path) -> None:
    """messages.json sessions (no store=) are searchable stores too: the same text lands beside the file."""
    agent = create_deep_agent(FunctionModel(_script))
    agent.tool_plain(report)

    deps = DeepAgentDeps(session_id="f", base_dir=tmp_path / "base")
    result = await agent.run("report please", deps=deps)
    middleware = deps.context_manager
    assert isinstance(middleware, ContextManagerMiddleware)
    assert deps.messages_path is not None
    store = middleware.store_for(deps.messages_path)
    assert [h.message_id for h in await store.search("quokkaflag")] == _holders(result.all_messages())


async def test_an_indexing_failure_is_logged_and_retried_at_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    original = SQLiteHistoryStore.add_search_text

    async def failing(self: SQLiteHistoryStore, message_id: str, text: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(SQLiteHistoryStore, "add_search_text", failing)
    deps = DeepAgentDeps(session_id="s", base_dir=tmp_path / "base")
    agent = _agent(url)
    first = await agent.run("report please", deps=deps)
    assert first.output == "read it"  # the run is not failed by its search index
    assert "could not index the evicted output" in caplog.text

    monkeypatch.setattr(SQLiteHistoryStore, "add_search_text", original)
    second = await agent.run("and again", deps=deps, message_history=first.all_messages())
    storage = open_storage(url)
    texts = await storage.history.session("s").search_texts()
    assert sorted(texts) == sorted(_holders(second.all_messages()))  # type: ignore[arg-type]
    await storage.close()
