"""HistoryArchiveSearch: finds what was summarized away, keeps its index right, never throws at the model."""

from __future__ import annotations

import asyncio
from datetime import timedelta, timezone
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
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
from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    JsonHistoryStore,
    ensure_message_id,
    get_message_id,
    is_summary_message,
)

FACT = "The staging database password rotates every 17 days"


class LongSession:
    """Plants a fact early, reads files to grow the context until compacted twice, then searches and rehydrates."""

    def __init__(self) -> None:
        self.step = 0
        self.search_output = ""
        self.read_output = ""

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.step += 1
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returns and returns[0].tool_name == "search_conversation_history":
            self.search_output = str(returns[0].content)
            # The original message (a summary may quote the fact too, with the original's id or without it).
            message_id = self.search_output.split("[User] message id ")[1].split()[0]
            return ModelResponse(parts=[ToolCallPart("read_history", {"start_id": message_id})])
        if returns and returns[0].tool_name == "read_history":
            self.read_output = str(returns[0].content)
            return ModelResponse(parts=[TextPart("found it")])
        if any(isinstance(p, UserPromptPart) and "what rotates" in str(p.content) for p in last.parts):
            return ModelResponse(parts=[ToolCallPart("search_conversation_history", {"query": "password rotates"})])
        if self.step % 3:
            return ModelResponse(parts=[ToolCallPart("read_file", {"path": f"/notes/{self.step % 5}.md"})])
        return ModelResponse(parts=[TextPart(f"noted, step {self.step}")])


async def test_search_finds_a_fact_that_was_summarized_away_and_read_history_returns_it(tmp_path: Path) -> None:
    model = LongSession()
    middleware = ContextManagerMiddleware(
        max_tokens=3_000, summarization_model=None, messages_path=lambda ctx: ctx.deps.messages_path
    )
    agent = create_deep_agent(FunctionModel(model), context_manager=middleware, history_search=True)
    deps = DeepAgentDeps(base_dir=tmp_path, session_id="long")
    for i in range(5):
        await deps.backend.write(f"/notes/{i}.md", f"note {i}\n" + "filler text for the context window\n" * 60)
    history = (await agent.run(FACT + ". Remember it.", deps=deps)).all_messages()
    for turn in range(6):
        history = (await agent.run(f"Keep reading, turn {turn}.", deps=deps, message_history=history)).all_messages()
    assert middleware.compression_count >= 2
    assert not any(FACT in str(p) for m in history for p in m.parts if not is_summary_message(m))
    result = await agent.run("Search: what rotates every 17 days?", deps=deps, message_history=history)
    assert result.output == "found it"
    assert "password rotates" in model.search_output.lower() or "17 days" in model.search_output
    assert FACT in model.read_output
    records = ModelMessagesTypeAdapter.validate_json(deps.messages_path.read_bytes())  # type: ignore[union-attr]
    original = next(m for m in records if FACT in str(m.parts))
    assert get_message_id(original) in model.read_output


def _write_history(path: Path, texts: list[str], *, tool: str | None = None) -> list[ModelMessage]:
    store = JsonHistoryStore.open(path)
    messages: list[ModelMessage] = []
    for i, text in enumerate(texts):
        if tool and i % 2:
            messages.append(ModelResponse(parts=[ToolCallPart(tool, {"q": text}, tool_call_id=f"c{i}")]))
        elif i % 2:
            messages.append(ModelResponse(parts=[TextPart(text)]))
        else:
            messages.append(ModelRequest(parts=[UserPromptPart(text)]))
    for message in messages:
        ensure_message_id(message)
    store.append_sync(messages)
    return messages


async def test_index_stays_right_across_resume_deletion_and_growth(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    _write_history(path, ["alpha one", "beta two", "gamma three"])
    search = HistoryArchiveSearch(messages_path=path)
    assert (await search.search("beta")).total_shown == 1
    _write_history(path, ["delta four", "epsilon five"])  # appended: the index catches up incrementally
    assert (await search.search("epsilon")).total_shown == 1
    resumed = HistoryArchiveSearch(messages_path=path)  # a new process would do the same
    assert (await resumed.search("gamma")).total_shown == 1
    index_file = path.with_name("messages.json.index.sqlite")
    for index in (search.index_for(path), resumed.index_for(path)):
        index.close()
    index_file.unlink()
    _write_history(path, ["zeta six"])  # the file grew while the index was missing
    rebuilt = HistoryArchiveSearch(messages_path=path)
    for word in ("alpha", "delta", "zeta"):
        assert (await rebuilt.search(word)).total_shown == 1, word
    assert rebuilt.index_for(path).indexed_records() == 6


async def test_a_replaced_history_file_is_reindexed(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    _write_history(path, ["old content here"])
    search = HistoryArchiveSearch(messages_path=path)
    assert (await search.search("old")).total_shown == 1
    JsonHistoryStore.open(path).close()
    path.unlink()
    _write_history(path, ["brand new text"])
    assert (await search.search("old")).total_shown == 0
    assert (await search.search("brand")).total_shown == 1


@pytest.mark.parametrize(
    "query",
    ["", "   ", "AND OR NOT", '"" "" ""', "***", "(", "NEAR(a b)", "x" * 10_000, "a " * 5_000, "部署", '"unterminated'],
)
async def test_bad_queries_get_results_or_a_clear_message(tmp_path: Path, query: str) -> None:
    path = tmp_path / "messages.json"
    _write_history(path, ["我们明天在北京部署新版本", "deployment went fine", "a b c"])
    search = HistoryArchiveSearch(messages_path=path)
    agent = Agent(
        FunctionModel(
            lambda m, i: (
                ModelResponse(parts=[TextPart("done")])
                if isinstance(m[-1].parts[0], ToolReturnPart)
                else ModelResponse(parts=[ToolCallPart("search_conversation_history", {"query": query})])
            )
        ),
        toolsets=[search.toolset()],
    )
    result = await agent.run("search")
    (tool_return,) = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    text = str(tool_return.content)
    assert text.startswith(("Matches for", "No messages match", "Search not run:")), text[:200]
    assert len(text) < 12_000


async def test_cjk_text_is_findable(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    _write_history(path, ["我们明天在北京部署新版本", "東京の会議は月曜日です", "서울에서 만나요"])
    search = HistoryArchiveSearch(messages_path=path)
    for query in ("北京", "部署", "会議", "서울"):
        result = await search.search(query)
        assert result.total_shown == 1, query


async def test_filters_phrases_prefixes_and_pages(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    texts = [f"report number {i} about the parser" for i in range(30)]
    messages = _write_history(path, texts, tool="grep")
    search = HistoryArchiveSearch(messages_path=path, max_results=10, token_budget=5_000)
    assert (await search.search("parser", role="user")).total_shown == 10
    assert all(
        "User" in line
        for line in (await search.search("parser", role="user")).text.splitlines()
        if line[:3].strip().rstrip(".").isdigit()
    )
    tool_hits = await search.search("parser", tool_name="grep")
    assert tool_hits.total_shown == 10 and all("grep" in h.tool_names for h in tool_hits.hits)
    assert (await search.search('"number 7 about"')).total_shown == 1
    assert (await search.search("pars*")).total_shown == 10
    page2 = await search.search("parser", page=2)
    page1 = await search.search("parser", page=1)
    assert {h.message_id for h in page1.hits}.isdisjoint(h.message_id for h in page2.hits)
    assert "page=2" in page1.text
    stamp = messages[11].timestamp  # a response: requests built by hand carry no timestamp
    assert stamp is not None
    since = await search.search("parser", since=stamp.isoformat())
    assert since.total_shown > 0 and all(h.timestamp >= stamp.isoformat() for h in since.hits)
    shifted = stamp.astimezone(timezone(timedelta(hours=2))).isoformat()  # the same moment, another offset
    assert (await search.search("parser", since=shifted)).total_shown == since.total_shown
    with pytest.raises(QueryError, match="ISO time"):
        await search.search("parser", since="yesterday")
    with pytest.raises(QueryError):
        await search.search("parser", page=0)


async def test_output_is_capped_by_the_token_budget(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    _write_history(path, [("needle " + "long line of text " * 40 + "\n") * 20 for _ in range(10)])
    search = HistoryArchiveSearch(messages_path=path, token_budget=400)
    result = await search.search("needle")
    assert len(result.text) / 4 <= 450
    assert "cut to stay within the output budget" in result.text


async def test_cross_session_search(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    _write_history(sessions / "a" / "messages.json", ["the blue whale is large"])
    _write_history(sessions / "b" / "messages.json", ["the blue sky is clear"])
    search = HistoryArchiveSearch(messages_path=sessions / "a" / "messages.json", sessions_dir=sessions)
    assert (await search.search("blue")).total_shown == 1
    everywhere = await search.search("blue", session="all")
    assert {h.session for h in everywhere.hits} == {"a", "b"}
    assert (await search.search("sky", session="b")).total_shown == 1
    with pytest.raises(QueryError, match="no session"):
        await search.search("sky", session="c")
    with pytest.raises(QueryError, match="invalid session id"):
        await search.search("sky", session="../a")


async def test_queries_do_not_block_the_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    _write_history(path, [f"message {i} with some words" for i in range(2_000)])
    search = HistoryArchiveSearch(messages_path=path)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    task = asyncio.create_task(ticker())
    await search.search("words")  # the cold build runs in a worker thread
    task.cancel()
    assert ticks > 0


def test_bad_settings_fail_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="either store or messages_path"):
        HistoryArchiveSearch(store=JsonHistoryStore(tmp_path / "x.json"), messages_path=tmp_path / "y.json")
    with pytest.raises(ValueError, match="max_results"):
        HistoryArchiveSearch(max_results=0)
