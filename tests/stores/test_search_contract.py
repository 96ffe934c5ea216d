"""The `SearchableHistoryStore` / `HistoryDatabase.search` contract, run against every store."""

from __future__ import annotations

import pytest

from summarization_pydantic_ai import get_message_id
from summarization_pydantic_ai.store import HistoryDatabase, HistoryStoreError, SearchQueryError

from .helpers import START, edited, tool_exchange, turns


async def test_search_finds_ranks_and_pages(database: HistoryDatabase) -> None:
    store = database.session("s")
    messages = turns(6)
    await store.append(messages)
    hits = await store.search("question")
    assert [h.message_id for h in hits] == [get_message_id(messages[i]) for i in (0, 2, 4)]
    assert [h.position for h in hits] == [0, 2, 4]
    assert hits[0].session_id == "s"
    assert hits[0].roles == "user"
    assert "question 0 about apples" in hits[0].body
    # More of the query's terms rank first.
    best = await store.search("answer 3")
    assert best[0].message_id == get_message_id(messages[3])
    assert best[0].score > best[-1].score
    page = await store.search("question", limit=2, offset=2)
    assert [h.position for h in page] == [4]


async def test_search_ignores_case_and_diacritics_and_finds_prefixes_and_cjk(database: HistoryDatabase) -> None:
    store = database.session("s")
    messages = turns(2)
    await store.append(messages)
    await store.append(turns(2, start=2, topic="Crème Brûlée 東京タワー"))
    assert [h.position for h in await store.search("CREME brulee")] == [2, 3]
    assert [h.position for h in await store.search("quest*")] == [0, 2]
    assert [h.position for h in await store.search("東京")] == [2, 3]
    assert await store.search('"about apples" nothingmatches') != []
    assert await store.search("zebra") == []


async def test_search_filters_by_role_tool_and_time(database: HistoryDatabase) -> None:
    store = database.session("s")
    messages = [*turns(4), *tool_exchange("lookup_weather", "sunny in apples town")]
    await store.append(messages)
    assert {h.roles for h in await store.search("apples", roles=["tool"])} == {"tool"}
    by_tool = await store.search("apples", tool_name="lookup_weather")
    assert [h.message_id for h in by_tool] == [get_message_id(messages[5])]
    assert by_tool[0].tool_names == "lookup_weather"
    since = (START.replace(minute=2)).isoformat()
    until = (START.replace(minute=3)).isoformat()
    window = await store.search("apples", since=since, until=until)
    assert sorted(h.position for h in window) == [2, 3]


async def test_only_the_latest_version_is_searched(database: HistoryDatabase) -> None:
    store = database.session("s")
    messages = turns(2)
    await store.append(messages)
    await store.append([edited(messages[1], "rewritten with bananas")])
    assert [h.position for h in await store.search("bananas")] == [1]
    assert [h.position for h in await store.search("answer")] == []


async def test_added_search_text_is_found_with_its_message(database: HistoryDatabase) -> None:
    store = database.session("s")
    messages = turns(2)
    await store.append(messages)
    message_id = get_message_id(messages[1])
    assert message_id is not None
    await store.add_search_text(message_id, "evicted output mentions kumquats")
    hits = await store.search("kumquats")
    assert [h.message_id for h in hits] == [message_id]
    assert "kumquats" in hits[0].body
    await store.add_search_text(message_id, "now about figs")
    assert await store.search("kumquats") == []
    assert await store.search_texts() == {message_id: "now about figs"}
    with pytest.raises(HistoryStoreError, match="no message"):
        await store.add_search_text("unknown-id", "text")


@pytest.mark.parametrize("query", ["", "   ", "!!! ???", "AND OR"])
async def test_a_query_without_words_is_refused_with_advice(database: HistoryDatabase, query: str) -> None:
    store = database.session("s")
    await store.append(turns(2))
    with pytest.raises(SearchQueryError, match="searchable words"):
        await store.search(query)


async def test_hostile_queries_are_plain_text(database: HistoryDatabase) -> None:
    store = database.session("s")
    await store.append(turns(2))
    for query in ['"unbalanced', "NEAR(a b)", "col:question", "a' OR 1=1 --", "question)*("]:
        await store.search(query)  # never a syntax error


async def test_database_search_spans_sessions(database: HistoryDatabase) -> None:
    await database.session("a").append(turns(2, topic="apples"))
    await database.session("b").append(turns(2, topic="pears and apples"))
    hits = await database.search("pears")
    assert {h.session_id for h in hits} == {"b"}
    both = await database.search("apples")
    assert {h.session_id for h in both} == {"a", "b"}
    only_a = await database.search("apples", session_ids=["a"])
    assert {h.session_id for h in only_a} == {"a"}
    assert len(await database.search("apples", limit=1)) == 1
