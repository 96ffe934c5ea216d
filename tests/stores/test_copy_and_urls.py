"""`copy_sessions` is lossless between every pair of stores; `open_store`/`open_database` read URLs safely."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from summarization_pydantic_ai import get_message_id
from summarization_pydantic_ai.store import (
    HistoryDatabase,
    HistoryStoreError,
    JsonHistoryDatabase,
    JsonHistoryStore,
    StoreURLError,
    copy_sessions,
    open_database,
    open_store,
    redact_url,
)
from summarization_pydantic_ai.store._sqlite import SQLiteHistoryDatabase, SQLiteHistoryStore

from .conftest import StoreTarget
from .helpers import dumped, edited, summary, turns


async def _fill(database: HistoryDatabase) -> None:
    messages = turns(8)
    one = database.session("one")
    await one.append(messages)
    await one.append([edited(messages[1], "edited once"), edited(messages[1], "edited twice")])
    await one.append([summary(messages[:6], before=[], after=messages[6:]), *turns(2, start=8)])
    message_id = get_message_id(messages[3])
    assert message_id is not None
    await one.add_search_text(message_id, "an evicted output about kumquats")
    await database.session("two").append(turns(3, topic="pears"))


async def _same(a: HistoryDatabase, b: HistoryDatabase) -> None:
    assert sorted(s.session_id for s in await a.sessions()) == sorted(s.session_id for s in await b.sessions())
    for session in await a.sessions():
        x, y = a.session(session.session_id), b.session(session.session_id)
        assert dumped(await x.load_versions()) == dumped(await y.load_versions())
        assert dumped(await x.load()) == dumped(await y.load())
        assert await x.search_texts() == await y.search_texts()


async def test_copy_there_and_back_is_lossless(store_target: StoreTarget, tmp_path: Path) -> None:
    source = store_target.open()
    await _fill(source)
    middle = SQLiteHistoryDatabase(tmp_path / "middle.db") if store_target.name == "file" else None
    middle_db: HistoryDatabase = middle or JsonHistoryDatabase(tmp_path / "middle")
    report = await copy_sessions(source, middle_db)
    assert report.sessions == 2
    assert report.records["one"] == 8 + 2 + 1 + 2
    assert report.search_texts["one"] == 1
    back = open_database(f"sqlite:///{tmp_path / 'back.db'}")
    await copy_sessions(middle_db, back)
    await _same(source, middle_db)
    await _same(source, back)
    hits = await back.session("one").search("kumquats")
    assert len(hits) == 1
    again = await copy_sessions(source, middle_db)  # a second run copies nothing
    assert again.records == {"one": 0, "two": 0}
    assert again.skipped["one"] == 13
    for database in (middle_db, back):
        await database.close()


async def test_copy_refuses_a_destination_session_with_other_records(database: HistoryDatabase, tmp_path: Path) -> None:
    await database.session("s").append(turns(2))
    other = JsonHistoryDatabase(tmp_path / "other")
    await other.session("s").append(turns(2, topic="different"))
    with pytest.raises(HistoryStoreError, match="other records"):
        await copy_sessions(database, other)
    with pytest.raises(HistoryStoreError, match="no session"):
        await copy_sessions(database, other, ["missing"])
    await other.close()


def test_redact_url_hides_passwords() -> None:
    assert redact_url("postgresql://me:s3cret@db:5432/app") == "postgresql://me:***@db:5432/app"
    assert redact_url("postgresql://db/app?user=me&password=s3cret") == "postgresql://db/app?user=me&password=***"
    assert redact_url("sqlite:///x.db") == "sqlite:///x.db"


def test_unknown_schemes_and_missing_drivers_are_clear(tmp_path: Path) -> None:
    with pytest.raises(StoreURLError, match=r"unknown store URL scheme 'mysql'.*:\*\*\*@"):
        open_database("mysql://me:s3cret@host/db")
    with pytest.raises(StoreURLError, match="names no path"):
        open_database("sqlite:///")
    database = open_database("postgresql://me:s3cret@127.0.0.1:1/none")  # nothing connects before first use
    assert "s3cret" not in database.url


def test_a_missing_postgres_driver_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n == "psycopg" or n.startswith(("psycopg.", "psycopg_pool"))]:
        monkeypatch.delitem(sys.modules, name)
    for name in [
        n
        for n in sys.modules
        if n.startswith(("summarization_pydantic_ai.store._postgres", "pydantic_deep.storage._postgres"))
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    from pydantic_deep.storage import open_storage

    for opening in (open_database, open_storage):  # the history database alone, and the harness's storage
        with pytest.raises(StoreURLError, match=r"pip install 'summarization-pydantic-ai\[postgres\]'") as info:
            opening("postgresql://me:s3cret@127.0.0.1:1/none")
        assert "s3cret" not in str(info.value)


async def test_open_store_selects_the_store(tmp_path: Path) -> None:
    file_store = open_store(tmp_path / "a" / "messages.json")
    assert isinstance(file_store, JsonHistoryStore)
    by_folder = open_store((tmp_path / "sessions").as_uri(), "chat 1")
    assert isinstance(by_folder, JsonHistoryStore)
    assert by_folder.path == tmp_path / "sessions" / "chat 1" / "messages.json"
    sqlite_store = open_store(f"sqlite:///{tmp_path / 'h.db'}", "chat")
    assert isinstance(sqlite_store, SQLiteHistoryStore)
    await sqlite_store.append(turns(2))
    assert [s.session_id for s in await sqlite_store.database.sessions()] == ["chat"]
    assert open_store(f"sqlite:///{tmp_path / 'h.db'}").session_id == "default"
    with pytest.raises(StoreURLError, match="one history file"):
        open_store(tmp_path / "a" / "messages.json", "s")
    for store in (file_store, by_folder):
        store.close()
    await sqlite_store.database.close()
