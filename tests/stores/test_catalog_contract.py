"""The session catalogue, run against every store (messages.json, SQLite, PostgreSQL): what a listing shows is what
the records hold, kept by every append, and rebuilt exactly when the stored catalogue is missing, damaged, or
behind its history (an older writer, a crash between the record write and the catalogue write)."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai.store import HistoryDatabase, SessionCatalog, _catalog, _catalog_file, read_catalog

from .conftest import StoreTarget
from .helpers import START, edited, expected, priced, summary, tool_exchange, turns, view

Database = Any  # SQLite, PostgreSQL or a folder of messages.json: each has `catalog()`


async def seed(database: HistoryDatabase, session_id: str = "s1") -> list[ModelMessage]:
    """A session of every shape: priced answers, a tool exchange, a summary, an edit, answers of another model."""
    store = database.session(session_id)
    first, tools = priced(6, 0), tool_exchange("grep", "the needle")
    await store.append([*first, *tools])
    await store.append([summary(first[:4], before=first, after=first[4:])])
    await store.append([edited(first[0], "question 0, edited"), edited(first[1], "answer 1, edited")])
    await store.append(priced(4, 6, model="gpt-4o-mini"))
    return await store.load_versions()


@contextmanager
def rebuilds() -> Iterator[list[int]]:
    """Count the catalogues folded again from the records (file: the sidecar; databases: the row)."""
    counted: list[int] = []
    original = _catalog.fold_records

    def counting(records: Any) -> _catalog.CatalogFold:
        counted.append(1)
        return original(records)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_catalog, "fold_records", counting)
        patch.setattr(_catalog_file, "fold_records", counting)
        yield counted


async def entries(database: Database) -> dict[str, SessionCatalog]:
    return {entry.session_id: entry for entry in await database.catalog()}


async def test_the_catalogue_is_what_the_records_hold(database: Database) -> None:
    records = await seed(database)
    await database.session("s2").append(turns(2, 20))
    with rebuilds() as rebuilt:
        listed = await entries(database)
    assert rebuilt == []  # kept by the appends: nothing is read but the catalogue
    assert view(listed["s1"]) == expected(records)
    assert listed["s1"].first_prompt == "question 0 about apples"  # the first record of a message counts
    assert listed["s1"].model == "openai:gpt-4o-mini" and listed["s1"].cost.total.requests == 6  # and the tool call
    assert listed["s1"].first_message_at == START and listed["s2"].first_message_at == START + timedelta(minutes=20)
    assert listed["s1"].size_bytes == database.session("s1").size_bytes() > 0
    assert [e.session_id for e in await database.catalog()] == ["s2", "s1"]  # the latest written first
    assert [e.session_id for e in await database.catalog(["s1"])] == ["s1"]
    assert await database.catalog(["nothing-here"]) == []
    assert view((await entries(database))["s2"]) == expected(turns(2, 20))


Damage = Callable[[StoreTarget, str], Awaitable[None]]


async def _run_sql(target: StoreTarget, statement: str, params: tuple[Any, ...] = ()) -> None:
    if target.name == "sqlite":
        db = sqlite3.connect(target.url.removeprefix("sqlite:///"))
        with db:
            db.execute(statement.replace("%s", "?").replace("spa_", ""), params)
        db.close()
    else:
        import psycopg

        async with await psycopg.AsyncConnection.connect(target.url, autocommit=True) as conn:
            await conn.execute(statement, params)  # pyright: ignore[reportArgumentType]


async def _deleted(target: StoreTarget, root: str) -> None:
    if target.name == "file":
        _catalog_file.catalog_path(Path(root) / "s1" / "messages.json").unlink()
    else:
        await _run_sql(target, "DELETE FROM spa_session_catalog")


async def _damaged(target: StoreTarget, root: str) -> None:
    if target.name == "file":
        path = _catalog_file.catalog_path(Path(root) / "s1" / "messages.json")
        path.write_bytes(path.read_bytes()[:40])  # truncated: torn while being written
    else:
        await _run_sql(target, "UPDATE spa_session_catalog SET shown = %s", ('{"format": "of another kind"}',))


async def _behind(target: StoreTarget, root: str) -> None:
    """The catalogue of an older state of the history (the catalogue write of the latest append never came)."""
    if target.name == "file":
        path = _catalog_file.catalog_path(Path(root) / "s1" / "messages.json")
        path.write_bytes(_behind_copy[0])
    else:
        await _run_sql(target, "UPDATE spa_session_catalog SET head = head - 1")


_behind_copy: list[bytes] = []


@pytest.mark.parametrize("damage", [_deleted, _damaged, _behind], ids=["deleted", "damaged", "behind"])
async def test_a_catalogue_missing_damaged_or_behind_is_rebuilt_on_the_next_read(
    store_target: StoreTarget, database: Database, damage: Damage
) -> None:
    await seed(database)
    root = str(database.root) if store_target.name == "file" else ""
    if root:
        _behind_copy[:] = [_catalog_file.catalog_path(Path(root) / "s1" / "messages.json").read_bytes()]
    await database.session("s1").append(turns(2, 30))
    await damage(store_target, root)
    other = store_target.open()  # another process: nothing of the writer's in memory
    records = await other.session("s1").load_versions()
    with rebuilds() as rebuilt:
        assert view((await entries(other))["s1"]) == expected(records)
    assert rebuilt == [1]
    with rebuilds() as rebuilt:  # written again: the next read is quick
        assert view((await entries(other))["s1"]) == expected(records)
        await database.session("s1").append(turns(2, 40))  # and the writer goes on from it
        records = await other.session("s1").load_versions()
        assert view((await entries(other))["s1"]) == expected(records)
    assert rebuilt == []


async def test_an_append_by_a_writer_that_keeps_no_catalogue_is_caught_up(
    store_target: StoreTarget, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version of the library that knows no catalogue (or a writer killed between its record write and its
    catalogue write) appends: the listing is exact at once, and the next append keeps the catalogue again."""
    from summarization_pydantic_ai.store._postgres import _store as postgres_store
    from summarization_pydantic_ai.store._sqlite import _store as sqlite_store

    await seed(database)

    async def nothing_async(*args: Any) -> None:
        return None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_catalog_file.FileCatalogWriter, "commit", lambda *args: None)
        patch.setattr(sqlite_store, "write_catalog", lambda *args: None)
        patch.setattr(postgres_store, "catalog_before", nothing_async)
        await database.session("s1").append(priced(2, 50))
    records = await database.session("s1").load_versions()
    assert view((await entries(database))["s1"]) == expected(records)
    await database.session("s1").append(priced(2, 52))
    records = await database.session("s1").load_versions()
    with rebuilds() as rebuilt:
        assert view((await entries(database))["s1"]) == expected(records)
    assert rebuilt == []


def test_read_catalog_of_a_file(tmp_path: Path) -> None:
    from summarization_pydantic_ai import JsonHistoryStore

    path = tmp_path / "chat" / "messages.json"
    assert read_catalog(path) is None
    store = JsonHistoryStore(path)
    store.append_sync(priced(4, 0))
    entry = read_catalog(path)
    assert entry is not None and entry.session_id == "chat" and entry.message_count == 4
    assert entry.size_bytes == path.stat().st_size and entry.created_at is None and entry.updated_at is not None
    store.close()


def test_a_response_of_an_unknown_model_is_listed_without_a_word_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Listing reads what was spent; it prices nothing, so it warns about nothing (it used to print
    '... is unknown to genai-prices ...' for every such model)."""
    import uuid

    from pydantic_deep import SessionManager
    from summarization_pydantic_ai import JsonHistoryStore

    model = f"local-model-{uuid.uuid4().hex[:8]}"  # never warned about before in this process
    store = JsonHistoryStore(tmp_path / "sessions" / "s" / "messages.json")
    answer = ModelResponse([TextPart("hi")], model_name=model, usage=RequestUsage(input_tokens=10, output_tokens=2))
    store.append_sync([*turns(1), *_with_id(answer)])
    store.close()
    capsys.readouterr()
    with caplog.at_level("WARNING"):
        [info] = SessionManager(tmp_path).list()
        assert SessionManager(tmp_path).get("s").cost == info.cost
    assert info.model == model and info.cost.unpriced_models == (model,) and info.cost.total.cost_usd is None
    assert capsys.readouterr().err == "" and caplog.records == []


def _with_id(message: ModelMessage) -> list[ModelMessage]:
    from summarization_pydantic_ai import ensure_message_id

    ensure_message_id(message)
    return [message]


async def test_the_listed_cost_is_the_records_cost_with_compactions_summarizer_and_prompt_cache(tmp_path: Path) -> None:
    """Through `Agent.run` with cost tracking and compaction: the catalogue's totals (priced as the records were
    appended) are `session_costs` of the records, prompt-cache figures and reductions included."""
    from cost._scripted import Reader, SummaryModel, make_agent, read_files
    from cost.test_middleware import context_manager

    from pydantic_deep import SessionManager
    from summarization_pydantic_ai import CostTrackingMiddleware, JsonHistoryStore, session_costs

    path = tmp_path / "sessions" / "s" / "messages.json"
    manager = context_manager(path, SummaryModel())
    agent = make_agent(Reader(), [manager, CostTrackingMiddleware(context_manager=manager)])
    await read_files(agent, 6)
    records = await JsonHistoryStore.open(path).load_all()
    info = SessionManager(tmp_path).get("s")
    assert info.cost == session_costs(records) and info.compactions >= 1
    assert info.cost.cache.requests > 0 and info.cost.summarizer.requests >= 1
    _catalog_file.catalog_path(path).unlink()  # rebuilt from the records: the same
    assert SessionManager(tmp_path).get("s").cost == info.cost


def test_a_catalogue_that_would_run_code_is_refused_and_rebuilt(tmp_path: Path) -> None:
    """The pickles of a catalogue are read back with only the cost classes allowed: a planted one runs nothing."""
    import os
    import pickle
    import zlib

    from summarization_pydantic_ai import JsonHistoryStore

    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.mkdir, (str(marker),))

    path = tmp_path / "s" / "messages.json"
    store = JsonHistoryStore(path)
    store.append_sync(priced(4, 0))
    store.close()
    sidecar = _catalog_file.catalog_path(path)
    first, _, body = sidecar.read_bytes().partition(b"\n")
    inode, size, mtime, shown = (int(n) for n in first.split(b" ")[1:])
    length, _, rest = body[:shown].partition(b"\n")
    planted = b"%s\n%s%s" % (length, rest[: int(length)], pickle.dumps(Planted()))  # the view kept, totals planted
    head = b"%d %d %d %d" % (inode, size, mtime, len(planted))
    body = planted + body[shown:]
    sidecar.write_bytes(b"%08x %s\n%s" % (zlib.crc32(body, zlib.crc32(head)), head, body))
    entry = read_catalog(path)
    assert entry is not None and view(entry) == expected(priced(4, 0)) and not marker.exists()
