"""The `HistoryStore` contract, run against every store (see conftest): order, exactly-once, versions, lineage,
rehydration, paging, persistence."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelRequest, UserPromptPart

from summarization_pydantic_ai import get_message_id, working_context
from summarization_pydantic_ai.store import HistoryDatabase, HistoryStoreError, InvalidSessionIdError

from .conftest import StoreTarget
from .helpers import dumped, edited, ids, plain_summary, summary, turns


async def test_messages_are_recorded_once_in_order(database: HistoryDatabase) -> None:
    store = database.session("s1")
    first, second = turns(4), turns(3, start=4)
    assert await store.append(first) == 4
    assert await store.append([*first, *second]) == 3  # the recorded ones are skipped
    assert await store.append(second) == 0
    everything = [*first, *second]
    assert dumped(await store.load_all()) == dumped(everything)
    assert dumped(await store.load()) == dumped(everything)
    assert len(store) == 7
    assert get_message_id(first[0]) in store
    assert "no-such-id" not in store
    assert store.size_bytes() > 0


async def test_a_message_without_an_id_is_refused_and_nothing_is_written(database: HistoryDatabase) -> None:
    store = database.session("s1")
    with pytest.raises(HistoryStoreError, match="id"):
        await store.append([*turns(2), ModelRequest(parts=[UserPromptPart("no id")])])
    assert await store.load_all() == []


async def test_an_edited_message_is_a_new_version_at_the_place_of_the_first(database: HistoryDatabase) -> None:
    store = database.session("s1")
    messages = turns(4)
    await store.append(messages)
    changed = edited(messages[1], "a corrected answer")
    assert await store.append([changed]) == 1
    assert await store.append([changed]) == 0  # the same version again
    assert dumped(await store.load_all()) == dumped([messages[0], changed, *messages[2:]])
    assert dumped(await store.load_versions()) == dumped([*messages, changed])
    assert len(store) == 4
    # Two versions in one append: both recorded, the last one wins.
    again, final = edited(messages[2], "v2"), edited(messages[2], "v3")
    assert await store.append([again, final]) == 2
    assert dumped((await store.load_all())[2:3]) == dumped([final])


async def test_load_returns_the_working_context_after_a_compaction(database: HistoryDatabase) -> None:
    store = database.session("s1")
    messages = turns(8)
    await store.append(messages)
    first_summary = summary(messages[:6], before=[], after=messages[6:])
    await store.append([first_summary])
    later = turns(2, start=8)
    await store.append(later)
    expected = [first_summary, *messages[6:], *later]
    assert dumped(await store.load()) == dumped(expected)
    assert dumped(await store.load()) == dumped(working_context(await store.load_all()))
    # Rehydration: the summarized originals, verbatim, by the ids the summary names.
    page = await store.read(get_message_id(messages[0]), get_message_id(messages[5]))
    assert dumped(page.messages) == dumped(messages[:6])


async def test_summaries_of_plain_processors_follow_their_lineage(database: HistoryDatabase) -> None:
    store = database.session("s1")
    messages = turns(10)
    await store.append(messages[:6])
    older = plain_summary(messages[:3])
    await store.append([older, *messages[6:8]])
    newer = plain_summary(messages[3:5], replaces=[older])
    await store.append([newer, *messages[8:]])
    loaded = await store.load()
    assert ids(loaded) == ids([newer, messages[5], *messages[6:]])
    assert dumped(loaded) == dumped(working_context(await store.load_all()))


async def test_read_pages_between_two_ids(database: HistoryDatabase) -> None:
    store = database.session("s1")
    messages = turns(12)
    await store.append(messages)
    start, end = get_message_id(messages[2]), get_message_id(messages[9])
    page = await store.read(start, end, limit=3)
    assert (page.total, page.offset, page.next_offset) == (8, 0, 3)
    assert dumped(page.messages) == dumped(messages[2:5])
    last = await store.read(start, end, offset=6, limit=3)
    assert last.next_offset is None
    assert dumped(last.messages) == dumped(messages[8:10])
    whole = await store.read()
    assert whole.total == 12
    with pytest.raises(HistoryStoreError, match="no message"):
        await store.read("unknown-id")
    with pytest.raises(HistoryStoreError, match="after"):
        await store.read(end, start)
    with pytest.raises(HistoryStoreError, match="offset"):
        await store.read(limit=0)


async def test_sessions_are_separate_listed_and_deleted(database: HistoryDatabase) -> None:
    one, two = database.session("one"), database.session("two")
    await one.append(turns(3))
    await two.append(turns(2, topic="pears"))
    assert database.session("one") is one
    listed = {s.session_id: s for s in await database.sessions()}
    assert set(listed) == {"one", "two"}
    assert (listed["one"].messages, listed["two"].messages) == (3, 2)
    assert listed["one"].size_bytes > 0
    assert listed["two"].updated_at is not None
    assert await database.delete_session("one") is True
    assert await database.delete_session("one") is False
    assert [s.session_id for s in await database.sessions()] == ["two"]
    assert await database.session("one").load_all() == []
    assert len(await database.session("two").load_all()) == 2


@pytest.mark.parametrize("bad", ["", "..", "a/b", "x\x00y", "x" * 256])
def test_an_invalid_session_id_is_refused(database: HistoryDatabase, bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        database.session(bad)


async def test_another_handle_sees_everything_recorded(store_target: StoreTarget) -> None:
    writer = store_target.open()
    messages = turns(5)
    changed = edited(messages[0], "edited")
    await writer.session("s").append([*messages, changed])
    await writer.close()
    reader = store_target.open()
    store = reader.session("s")
    assert dumped(await store.load_all()) == dumped([changed, *messages[1:]])
    assert dumped(await store.load_versions()) == dumped([*messages, changed])
    assert len(store) == 5


async def test_unicode_and_large_messages_round_trip(database: HistoryDatabase) -> None:
    store = database.session("s")
    big = turns(1)[0]
    assert isinstance(big, ModelRequest)
    big.parts = [UserPromptPart("日本語 émoji 🙂 \x00 nul " + "x" * 300_000)]
    await store.append([big])
    assert dumped(await store.load_all()) == dumped([big])
