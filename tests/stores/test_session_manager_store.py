"""`SessionManager(store=URL)`: sessions kept in a database (SQLite file or PostgreSQL) listed, resumed, cut at a
message, forked (every version, summaries, search texts), rewound and deleted there, with the file layout's rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage

from pydantic_deep import SessionManager
from pydantic_deep.checkpoints import Checkpoint
from pydantic_deep.sessions import ForkPointError, MessageNotFoundError, SessionExistsError, SessionNotFoundError
from pydantic_deep.storage import open_storage
from summarization_pydantic_ai import get_message_id, validate_history

from .helpers import dumped, edited, ids, summary, tool_exchange, turns


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_dsn"))
    return f"sqlite:///{tmp_path / 'agents.db'}"


async def _seed(url: str) -> dict[str, list[ModelMessage]]:
    """Session `alpha`: 4 turns, a tool exchange, a summary of the first 4, an edit, 2 more turns, a search text."""
    storage = open_storage(url)
    store = storage.history.session("alpha")
    first, tools, later = turns(4), tool_exchange("grep", "the needle is here"), turns(2, start=4)
    kept = first[2:]
    await store.append([*first, *tools])
    await store.append([summary(first[:2], before=first, after=kept)])
    await store.append([edited(first[3], "answer 3, edited")])
    await store.append(later)
    await store.add_search_text(get_message_id(tools[1]) or "", "full text of the grep output")
    await storage.close()
    return {"first": first, "tools": tools, "later": later}


async def test_list_get_resume_and_history_until_read_the_database(tmp_path: Path, database_url: str) -> None:
    seeded = await _seed(database_url)
    manager = SessionManager(tmp_path / "base", store=database_url)
    try:
        [info] = await manager.list_async()
        assert (info.id, info.message_count, info.compactions) == ("alpha", 8, 1)
        assert info.first_prompt == "question 0 about apples" and info.size_bytes > 0
        assert manager.storage is not None and info.history_url == manager.storage.url
        assert "agents.db" in manager.location or manager.location.startswith("postgresql://")
        resumed = await manager.resume("alpha")
        assert validate_history(resumed, for_request=False) == []
        assert await manager.history_until("alpha", None) == resumed
        # Before the summary's point: the original messages, with the edit (the latest version).
        at = await manager.history_until("alpha", get_message_id(seeded["first"][3]))
        assert ids(at) == ids(seeded["first"]) and "edited" in str(at[-1])
        with pytest.raises(ForkPointError, match="tool calls whose results come after it"):
            await manager.history_until("alpha", get_message_id(seeded["tools"][0]))
        with pytest.raises(MessageNotFoundError):
            await manager.history_until("alpha", "nope")
        with pytest.raises(SessionNotFoundError, match="no session 'ghost'"):
            await manager.resume("ghost")
        assert (await manager.get_async("alpha")).message_count == 8
    finally:
        await manager.close()


async def test_fork_copies_versions_summaries_and_search_texts_up_to_the_point(
    tmp_path: Path, database_url: str
) -> None:
    seeded = await _seed(database_url)
    base = tmp_path / "base"
    (base / "sessions" / "alpha" / "large_tool_results").mkdir(parents=True)
    (base / "sessions" / "alpha" / "large_tool_results" / "out.txt").write_text("evicted")
    manager = SessionManager(base, store=database_url)
    storage = manager.storage
    assert storage is not None
    try:
        point = get_message_id(seeded["later"][0])
        fork = await manager.fork("alpha", point, new_id="beta")
        assert fork.forked_from == f"alpha@{point}" and fork.message_count == 7 and fork.compactions == 1
        source, copy = storage.history.session("alpha"), storage.history.session("beta")
        versions = await source.load_versions()
        cut = [m for m in versions if get_message_id(m) != get_message_id(seeded["later"][1])]
        assert dumped(await copy.load_versions()) == dumped(cut)  # every version, the summary, in order
        assert await copy.search_texts() == await source.search_texts()
        assert {h.session_id for h in await storage.history.search("needle")} == {"alpha", "beta"}
        assert (base / "sessions" / "beta" / "large_tool_results" / "out.txt").read_text() == "evicted"
        assert validate_history(await manager.resume("beta"), for_request=False) == []
        assert dumped(await source.load_versions()) == dumped(versions)  # the source is unchanged
        whole = await manager.fork("alpha")
        assert whole.message_count == 8
        with pytest.raises(SessionExistsError):
            await manager.fork("alpha", new_id="beta")
        with pytest.raises(ForkPointError):
            await manager.fork("alpha", get_message_id(seeded["tools"][0]), new_id="gamma")
        assert {i.id for i in await manager.list_async()} == {"alpha", "beta", whole.id}  # nothing half-made
    finally:
        await manager.close()


async def test_rewind_create_and_delete(tmp_path: Path, database_url: str) -> None:
    seeded = await _seed(database_url)
    manager = SessionManager(tmp_path / "base", store=database_url)
    storage = manager.storage
    assert storage is not None
    try:
        point = seeded["first"][1]
        checkpoint = Checkpoint.from_json(
            {
                "id": "cp1",
                "session_id": "alpha",
                "name": "early",
                "message_id": get_message_id(point),
                "message_count": 2,
                "created": "2026-01-01T00:00:00+00:00",
                "auto": False,
            }
        )
        storage.checkpoints("alpha").save(checkpoint)
        rewound = await manager.rewind("alpha", "cp1", new_id="back")
        history = await manager.resume(rewound.id)
        assert ids(history) == ids(seeded["first"][:2]) and validate_history(history, for_request=False) == []
        created = await manager.create_async("fresh")
        assert created.message_count == 0 and not (tmp_path / "base" / "sessions" / "fresh" / "session.json").exists()
        assert {i.id for i in await manager.list_async()} == {"alpha", "back", "fresh"}
        # Another host (its own base_dir) sees the new session and where the rewound one comes from.
        other = SessionManager(tmp_path / "other-host", store=database_url)
        try:
            assert {i.id for i in await other.list_async()} == {"alpha", "back", "fresh"}
            assert (await other.get_async("back")).forked_from == f"alpha@{get_message_id(point)}"
            assert (await other.get_async("fresh")).created == created.created
            with pytest.raises(SessionExistsError):
                await other.create_async("fresh")
        finally:
            await other.close()
        with pytest.raises(SessionExistsError):
            await manager.create_async("alpha")
        await manager.delete_async("alpha")
        await manager.delete_async("fresh")
        assert storage.session_metadata is not None and storage.session_metadata.ids() == ["back"]
        assert await storage.history.session("alpha").load_all() == []
        assert storage.checkpoints("alpha").list() == []
        with pytest.raises(SessionNotFoundError):
            await manager.get_async("alpha")
        with pytest.raises(RuntimeError, match="list_async"):
            manager.list()  # blocking in the event loop: refused, saying what to call
    finally:
        await manager.close()


def test_the_plain_methods_work_outside_an_event_loop(tmp_path: Path) -> None:
    import anyio

    url = f"sqlite:///{tmp_path / 'agents.db'}"
    anyio.run(_seed, url)
    manager = SessionManager(tmp_path / "base", store=url)
    assert [i.id for i in manager.list()] == ["alpha"] and manager.get("alpha").message_count == 8
    assert manager.create("new-one").id == "new-one"
    manager.delete("alpha")
    assert [i.id for i in manager.list()] == ["new-one"]
    assert manager.deps("new-one").session_id == "new-one"
    # A file:// store is the file layout under that directory.
    files = SessionManager(store=(tmp_path / "layout").as_uri())
    assert files.storage is None and files.base_dir == tmp_path / "layout"
    assert files.create("x").messages_path == tmp_path / "layout" / "sessions" / "x" / "messages.json"
