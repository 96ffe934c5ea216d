"""End to end: `create_deep_agent(store=URL)` keeps history, memory and search in one database (SQLite file or
PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.checkpoints import CheckpointMiddleware
from pydantic_deep.storage import open_storage
from summarization_pydantic_ai import get_message_id

from .helpers import dumped


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Turn 1 saves a memory; turn 2 searches the history for it and reads the hit; each then answers."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    latest_prompt = [p for p in last.parts if p.part_kind == "user-prompt"]
    if latest_prompt and "remember" in str(latest_prompt[0].content):
        content = {"content": "The user drinks oolong tea."}
        return ModelResponse([ToolCallPart("write_memory", content, tool_call_id="m1")])
    if latest_prompt:
        return ModelResponse([ToolCallPart("search_conversation_history", {"query": "oolong"}, tool_call_id="s1")])
    assert returns
    return ModelResponse([TextPart(f"done: {str(returns[0].content)[:400]}")])


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_dsn"))
    return f"sqlite:///{tmp_path / 'agents.db'}"


async def test_sessions_memory_and_search_live_in_one_database(tmp_path: Path, database_url: str) -> None:
    url = database_url
    agent = create_deep_agent(FunctionModel(_script), store=url, memory=True, history_search=True)
    deps = DeepAgentDeps(session_id="chat-1", base_dir=tmp_path / "base")
    first = await agent.run("please remember: I drink oolong tea", deps=deps)
    second = await agent.run("what do I drink?", deps=deps, message_history=first.all_messages())
    assert "oolong" in str(second.output)  # the search found the first turn in the database

    storage = open_storage(url)
    store = storage.history.session("chat-1")
    recorded = await store.load_all()
    everything = second.all_messages()
    assert [get_message_id(m) for m in recorded] == [get_message_id(m) for m in everything]
    assert dumped(await store.load()) == dumped(recorded)
    assert await storage.memory.read("main") == "The user drinks oolong tea.\n"
    assert not (tmp_path / "base" / "sessions" / "chat-1" / "messages.json").exists()  # nothing in the file layout
    hits = await storage.history.search("oolong")
    assert {h.session_id for h in hits} == {"chat-1"}
    await storage.close()

    # Another process (a new agent over the same URL) continues the session from the database.
    again = create_deep_agent(FunctionModel(_script), store=url, memory=True, history_search=True)
    later = open_storage(url)
    resumed = await later.history.session("chat-1").load()
    third = await again.run("what do I drink now?", deps=deps, message_history=resumed)
    assert "oolong" in str(third.output)
    assert len(await later.history.session("chat-1").load_all()) == len(third.all_messages())
    await later.close()


def _build_log(needle: str) -> str:
    """A build log far above the eviction limit, with `needle` only near its end (well past any preview)."""
    lines = [f"step {i}: compiled module_{i} in {i % 7} ms" for i in range(4_000)]
    lines[3_900] = f"step 3900: linker warning {needle} in libfoo.so"
    return "\n".join(lines)


def _evict_then_search(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Turn 1 runs the build (a huge output, evicted); turn 2 searches the history for a word deep in that log."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    prompt = [p for p in last.parts if p.part_kind == "user-prompt"]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if prompt and "build" in str(prompt[0].content):
        return ModelResponse([ToolCallPart("run_build", {}, tool_call_id="b1")])
    if prompt:
        return ModelResponse([ToolCallPart("search_conversation_history", {"query": "zyxwarning"}, tool_call_id="s1")])
    assert returns
    return ModelResponse([TextPart(f"done: {str(returns[0].content)[:600]}")])


async def test_history_search_finds_text_deep_in_an_evicted_output(tmp_path: Path, database_url: str) -> None:
    agent = create_deep_agent(FunctionModel(_evict_then_search), store=database_url, history_search=True)

    @agent.tool_plain
    def run_build() -> str:  # pyright: ignore[reportUnusedFunction]
        """Run the build."""
        return _build_log("zyxwarning")

    deps = DeepAgentDeps(session_id="build-1", base_dir=tmp_path / "base")
    first = await agent.run("run the build", deps=deps)
    [preview] = [p for m in first.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert "zyxwarning" not in str(preview.content) and "large_tool_results" in str(preview.content)

    storage = open_storage(database_url)
    holder = next(m for m in first.all_messages() if any(p is preview for p in m.parts))
    hits = await storage.history.search("zyxwarning")
    assert [(h.session_id, h.message_id) for h in hits] == [("build-1", get_message_id(holder))]
    texts = await storage.history.session("build-1").search_texts()
    assert list(texts) == [get_message_id(holder)]

    second = await agent.run("any warnings?", deps=deps, message_history=first.all_messages())
    assert "zyxwarning" in str(second.output)  # the history-search tool found it
    assert await storage.history.session("build-1").search_texts() == texts  # indexed once, not again
    await storage.close()


def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse([TextPart(f"answer {len(messages)}")])


async def test_checkpoints_live_in_the_database_and_rewind_reads_it(tmp_path: Path) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'agents.db'}")
    checkpoints = CheckpointMiddleware(
        store=lambda ctx: storage.checkpoints(ctx.deps.session_id), history=storage.history
    )
    agent = create_deep_agent(FunctionModel(_answer), store=storage, capabilities=[checkpoints])
    deps = DeepAgentDeps(session_id="chat-2", base_dir=tmp_path / "base")
    first = await agent.run("one", deps=deps)
    second = await agent.run("two", deps=deps, message_history=first.all_messages())
    saved = storage.checkpoints("chat-2").list()
    assert [c.message_count for c in saved] == [len(first.all_messages()), len(second.all_messages())]
    assert not (tmp_path / "base" / "sessions" / "chat-2" / "checkpoints.json").exists()
    rewound = await checkpoints.rewind(saved[0].id)
    assert [get_message_id(m) for m in rewound] == [get_message_id(m) for m in first.all_messages()]
    await storage.close()
