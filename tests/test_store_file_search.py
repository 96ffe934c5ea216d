"""`JsonHistoryStore.search` goes through the search index beside the file and returns what a scan of the whole
history returns: the same hits in the same order, for every kind of query and filter, on a 2,000-message history
with edits, added search texts and text in several scripts; the harness's tools use the same index."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from pydantic_deep.history_search import HistoryArchiveSearch
from summarization_pydantic_ai import JsonHistoryStore, ensure_message_id, get_message_id
from summarization_pydantic_ai.store import SearchHit, shared_index
from summarization_pydantic_ai.store._json_search import load_search_texts
from summarization_pydantic_ai.store._scan_search import SearchFilter, scan_search

START = datetime(2026, 3, 1, tzinfo=UTC)
_WORDS = (
    *("deploy", "retry", "pool", "cache", "handler", "timeout", "migration", "kestrel-rotator", "connection_pool"),
    *("Crème", "brûlée", "naïve", "café", "Straße", "データベース", "東京", "서울에서", "만나요"),
    *("error42", "ZX-40417", "the", "a", "of", "in"),
)
_TOOLS = ("read_file", "run_tests", "grep")


def _history(size: int, seed: int = 7) -> list[ModelMessage]:
    rng = random.Random(seed)
    messages: list[ModelMessage] = []
    for i in range(size):
        stamp = START + timedelta(minutes=i)
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 30)))
        if i % 4 == 0:
            message: ModelMessage = ModelRequest(parts=[UserPromptPart(f"step {i}: {text}", timestamp=stamp)])
        elif i % 4 == 1:
            tool = rng.choice(_TOOLS)
            message = ModelResponse([TextPart(text), ToolCallPart(tool, {"q": text[:20]}, tool_call_id=f"c{i}")])
            message.timestamp = stamp
        elif i % 4 == 2:
            tool = rng.choice(_TOOLS)
            parts = [ToolReturnPart(tool, f"output {i}\n{text}", tool_call_id=f"c{i - 1}", timestamp=stamp)]
            message = ModelRequest(parts=parts)
        else:
            message = ModelResponse([TextPart(f"answer {i}: {text}")], timestamp=stamp)
        ensure_message_id(message)
        messages.append(message)
    return messages


QUERIES = [
    "kestrel-rotator",
    "deploy",
    "retry pool",
    '"connection pool"',
    "migrat*",
    "creme brulee",
    "STRASSE",
    "naive",
    "東京",
    "データ",
    "서울",
    "ZX-40417",
    "error42 timeout",
    "the",
    "zygomorphic",
]
FILTERS = [
    SearchFilter(),
    SearchFilter(roles=("user",)),
    SearchFilter(roles=("tool", "assistant")),
    SearchFilter(tool_name="grep"),
    # Names are compared whole and case-sensitively, as the scan compares them: no LIKE wildcards, no case folding.
    SearchFilter(tool_name="GREP"),
    SearchFilter(tool_name="gre_"),
    SearchFilter(roles=("USER",)),
    SearchFilter(
        since=(START + timedelta(minutes=500)).isoformat(), until=(START + timedelta(minutes=900)).isoformat()
    ),
]


def _scan(
    store: JsonHistoryStore, query: str, where: SearchFilter, messages: list[ModelMessage] | None = None
) -> list[SearchHit]:
    """Every hit of the scan, ranked (a page of it is a slice: the scan pages by slicing its ranking)."""
    texts = load_search_texts(store.path)
    history = store.load_all_sync() if messages is None else messages
    return scan_search(store.session_id, history, texts, query, where, limit=10_000, offset=0)


async def _search(store: JsonHistoryStore, query: str, where: SearchFilter, limit: int, offset: int) -> list[SearchHit]:
    return await store.search(
        query,
        roles=where.roles,
        tool_name=where.tool_name,
        since=where.since,
        until=where.until,
        limit=limit,
        offset=offset,
    )


@pytest.fixture
def store(tmp_path: Path) -> JsonHistoryStore:
    store = JsonHistoryStore(tmp_path / "s1" / "messages.json")
    history = _history(2_000)
    for start in range(0, len(history), 500):
        store.append_sync(history[start : start + 500])
    edited = [replace(history[i], parts=[TextPart(f"rewritten {i} with kestrel-rotator")]) for i in (3, 7, 1_001)]
    store.append_sync(edited)
    return store


async def test_the_index_returns_the_scans_hits_in_the_scans_order(store: JsonHistoryStore) -> None:
    message_id = get_message_id(store.load_all_sync()[10])
    assert message_id is not None
    await store.add_search_text(message_id, "evicted output about ZX-40417 and Straße")
    messages = store.load_all_sync()
    cases = [(query, FILTERS[0]) for query in QUERIES] + [(q, w) for q in QUERIES[1:4] for w in FILTERS[1:]]
    for query, where in cases:
        expected = _scan(store, query, where, messages)
        for limit, offset in ((10, 0), (2_000, 0), (7, 5)):
            found = await _search(store, query, where, limit, offset)
            assert found == expected[offset : offset + limit], (query, where, limit, offset)
    assert shared_index(store.path).indexed_records() == 2_000  # one row per message, edits included
    store.close()


async def test_appends_and_added_texts_are_caught_up_on_the_next_search(store: JsonHistoryStore) -> None:
    assert await store.search("walrus") == []
    assert shared_index(store.path).index_path.exists()
    more = _history(4, seed=99)
    more[0].parts[0].content = "a walrus appeared"  # type: ignore[union-attr]
    store.append_sync(more)
    assert [h.message_id for h in await store.search("walrus")] == [get_message_id(more[0])]
    first = get_message_id(store.load_all_sync()[0])
    assert first is not None
    await store.add_search_text(first, "now about a walrus too")
    assert {h.message_id for h in await store.search("walrus")} == {get_message_id(more[0]), first}
    assert await store.search("walrus") == _scan(store, "walrus", SearchFilter())
    store.close()


async def test_the_history_search_tools_use_the_same_index(store: JsonHistoryStore) -> None:
    search = HistoryArchiveSearch(store=store)
    assert search.index_for(store.path) is shared_index(store.path)
    result = await search.search("kestrel-rotator")
    assert result.total_shown == 10 and all("kestrel" in h.body.lower() for h in result.hits)
    store.close()
