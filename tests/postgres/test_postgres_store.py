"""What only the PostgreSQL store has: a versioned schema (in a schema of your choice), migration by many workers
at once, pool errors that name the server without its password, a worker killed inside its append transaction."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import socket
import time
from collections.abc import Iterator

import psycopg
import pytest
from pydantic_ai.messages import ModelRequest, UserPromptPart

from summarization_pydantic_ai import ensure_message_id, get_message_id
from summarization_pydantic_ai.store import HistoryStoreError, open_database, open_store
from summarization_pydantic_ai.store._postgres import SCHEMA_VERSION, PostgresHistoryDatabase, PostgresHistoryStore


def _turns(n: int, start: int = 0, text: str = "message") -> list[ModelRequest]:
    out: list[ModelRequest] = []
    for i in range(start, start + n):
        message = ModelRequest(parts=[UserPromptPart(f"{text} {i}")])
        ensure_message_id(message)
        out.append(message)
    return out


async def test_the_schema_is_created_on_first_use_with_its_version(postgres_dsn: str) -> None:
    database = open_database(postgres_dsn)
    assert isinstance(database, PostgresHistoryDatabase)
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT to_regclass('spa_sessions')").fetchone() == (None,)  # nothing before first use
    await database.session("s").append(_turns(2))
    await database.close()
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT version FROM spa_schema").fetchall() == [(SCHEMA_VERSION,)]
        indexes = {row[0] for row in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'spa_messages'")}
    assert "spa_messages_tsv" in indexes


async def test_a_schema_written_by_a_newer_version_is_refused(postgres_dsn: str) -> None:
    database = open_database(postgres_dsn)
    await database.session("s").append(_turns(1))
    await database.close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO spa_schema (version) VALUES (99)")
    newer = open_database(postgres_dsn)
    with pytest.raises(HistoryStoreError, match="newer version"):
        await newer.session("s").load()
    await newer.close()


async def test_tables_can_live_in_a_schema_of_their_own(postgres_dsn: str) -> None:
    store = open_store(postgres_dsn, "s", schema="agents")
    await store.append(_turns(3))
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM agents.spa_records").fetchone() == (3,)
        assert conn.execute("SELECT to_regclass('public.spa_records')").fetchone() == (None,)
    assert isinstance(store, PostgresHistoryStore)
    await store.database.close()


async def test_many_workers_starting_at_once_migrate_once(postgres_dsn: str) -> None:
    databases = [open_database(postgres_dsn) for _ in range(8)]
    counts = await asyncio.gather(*(db.session(f"s{i}").append(_turns(2)) for i, db in enumerate(databases)))
    assert counts == [2] * 8
    assert len(await databases[0].sessions()) == 8
    for database in databases:
        await database.close()


async def test_an_unreachable_server_is_a_clear_error_without_the_password() -> None:
    with socket_port() as port:
        database = open_database(f"postgresql://app:s3cret@127.0.0.1:{port}/db", timeout=1.0)
        assert "s3cret" not in database.url
        with pytest.raises(HistoryStoreError) as info:
            await database.session("s").load()
    assert "s3cret" not in str(info.value)
    assert "127.0.0.1" in str(info.value)
    await database.close()


async def test_an_unreachable_server_fails_at_once_for_histories_and_checkpoints() -> None:
    from pydantic_deep.storage import StorageError, open_storage

    with socket_port() as port:
        storage = open_storage(f"postgresql://app:s3cret@127.0.0.1:{port}/db")  # the default 30 s pool timeout
        started = time.monotonic()
        with pytest.raises(HistoryStoreError) as history_error:
            await storage.history.session("s").load()
        with pytest.raises(StorageError) as checkpoint_error:
            storage.checkpoints("s").list()
        assert time.monotonic() - started < 10  # refused: no waiting for the pool's timeout
    for error in (history_error.value, checkpoint_error.value):
        assert "s3cret" not in str(error) and f"no connection to postgresql://app:***@127.0.0.1:{port}/db" in str(error)
    await storage.close()


@contextlib.contextmanager
def socket_port() -> Iterator[int]:
    """A loopback port nothing listens on (bound, never listening, for the duration)."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield int(bound.getsockname()[1])


async def test_text_postgres_cannot_hold_is_still_recorded_and_searchable(postgres_dsn: str) -> None:
    database = open_database(postgres_dsn)
    store = database.session("s")
    nul = _turns(1, text="before\x00after zebra")[0]
    huge = _turns(1, start=1, text=" ".join(f"w{i}" for i in range(120_000)) + " " + "y" * 5000)[0]
    await store.append([nul, huge])
    assert [m.parts[0].content for m in await store.load_all()] == [nul.parts[0].content, huge.parts[0].content]
    assert [h.position for h in await store.search("zebra")] == [0]
    assert [h.position for h in await store.search("w7")] == [1]
    await database.close()


def _append_slowly(url: str, started: multiprocessing.synchronize.Event) -> None:
    async def run() -> None:
        database = open_database(url)
        started.set()
        await database.session("killed").append(_turns(20, text="partial"))

    asyncio.run(run())


def _in_transaction(conn: psycopg.Connection[tuple[object, ...]], database: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND xact_start IS NOT NULL "
        "AND pid <> pg_backend_pid() AND query LIKE %s",
        (database, "%spa_messages%"),
    ).fetchone()
    return bool(row and row[0])


async def test_a_worker_killed_inside_its_append_leaves_nothing_and_no_lock(postgres_dsn: str) -> None:
    database = open_database(postgres_dsn)
    await database.session("other").append(_turns(1))  # creates the schema
    name = postgres_dsn.rsplit("/", 1)[1]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        # Every search row written takes 50 ms: the worker is surely inside its transaction when killed.
        conn.execute(
            "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.05); "
            "RETURN NEW; END $$"
        )
        conn.execute("CREATE TRIGGER slow AFTER INSERT ON spa_messages FOR EACH ROW EXECUTE FUNCTION slow()")
        started = multiprocessing.get_context("fork").Event()
        worker = multiprocessing.get_context("fork").Process(target=_append_slowly, args=(postgres_dsn, started))
        worker.start()
        deadline = time.monotonic() + 30
        while not _in_transaction(conn, name):
            assert time.monotonic() < deadline, "the worker never started its append"
            time.sleep(0.02)
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)
        worker.join()
        assert worker.exitcode == -signal.SIGKILL
        conn.execute("DROP TRIGGER slow ON spa_messages")
        while _in_transaction(conn, name):  # the server rolls the dead client's transaction back
            assert time.monotonic() < deadline, "the killed worker's transaction never ended"
            time.sleep(0.05)
        assert conn.execute(
            "SELECT count(*) FROM spa_records WHERE message_id IN "
            "(SELECT message_id FROM spa_messages WHERE body LIKE '%partial%')"
        ).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM spa_messages WHERE body LIKE '%partial%'").fetchone() == (0,)
    store = database.session("killed")
    assert await store.load_all() == []
    survivors = _turns(3, text="after the kill")
    assert await asyncio.wait_for(store.append(survivors), 10) == 3  # the session's row lock was released
    assert [get_message_id(m) for m in await store.load_all()] == [get_message_id(m) for m in survivors]
    await database.close()


class _Statements:
    """Counts what connections send: statements (`execute`, also `conn.execute`'s), batches (`executemany`),
    transaction blocks."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[str] = []
        for name in ("execute", "executemany"):
            self._wrap(monkeypatch, psycopg.AsyncCursor, name)
        self._wrap(monkeypatch, psycopg.AsyncConnection, "transaction")

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> None:
        real = getattr(owner, name)

        def counted(instance: object, *args: object, **kwargs: object) -> object:
            self.sent.append(name)
            return real(instance, *args, **kwargs)

        monkeypatch.setattr(owner, name, counted)


async def test_an_append_of_the_store_that_wrote_last_is_one_statement(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The usual append (this store wrote or read the session last) is one statement: one round trip, its own
    transaction; a store that did not see the latest head locks the row and checks first, and a message recorded
    meanwhile by another writer is not written twice."""
    database = open_database(postgres_dsn)
    store, other = database.session("s"), open_database(postgres_dsn).session("s")
    written = _turns(5)
    await store.append(written[:2])  # the first append creates the session: the careful path
    statements = _Statements(monkeypatch)
    for message in written[2:]:
        assert await store.append([message]) == 1
    assert statements.sent == ["execute"] * 3
    shared = _turns(1, start=10)
    assert await other.append(shared) == 1  # `other` never read: it writes after whatever is there
    statements.sent.clear()
    assert await store.append(shared) == 0  # the head moved: one failed statement, then the locked check
    assert statements.sent[0] == "execute" and "transaction" in statements.sent
    assert [get_message_id(m) for m in await store.load_all()] == [get_message_id(m) for m in [*written, *shared]]
    await database.close()
    await other.database.close()  # type: ignore[attr-defined]
