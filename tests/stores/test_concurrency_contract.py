"""Several writers on one session: never interleaved, never lost, never duplicated; the loser gets a clear error."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import time
from multiprocessing.connection import Connection

import anyio
import pytest

from summarization_pydantic_ai import get_message_id
from summarization_pydantic_ai.store import (
    HistoryDatabase,
    HistoryStoreConflictError,
    open_database,
)

from .conftest import StoreTarget
from .helpers import dumped, ids, turns


async def test_the_second_writer_of_a_moved_session_gets_a_conflict(store_target: StoreTarget) -> None:
    if not store_target.multi_writer:
        pytest.skip("a messages.json has one writer process (HistoryStoreLockedError for another)")
    a, b = store_target.open().session("s"), store_target.open().session("s")
    base = turns(2)
    await a.append(base)
    assert dumped(await b.load()) == dumped(base)
    mine, theirs = turns(2, start=2, topic="a"), turns(2, start=2, topic="b")
    assert await a.append([*base, *mine]) == 2
    with pytest.raises(HistoryStoreConflictError, match="reload"):
        await b.append([*base, *theirs])
    assert dumped(await b.load_all()) == dumped([*base, *mine])  # nothing of the loser was written
    await b.load()  # the loser reloads and retries its turn on top of the winner's
    assert await b.append(theirs) == 2
    assert ids(await a.load_all()) == ids([*base, *mine, *theirs])
    # The same message from both sides is recorded once, and is no conflict.
    shared = turns(1, start=10)
    assert await a.append(shared) == 1
    assert await b.append(shared) == 0


async def test_a_writer_that_has_not_read_never_conflicts(store_target: StoreTarget) -> None:
    a = store_target.open().session("s")
    await a.append(turns(2))
    b = store_target.open().session("s")
    assert await b.append(turns(2, start=2)) == 2
    assert len(await a.load_all()) == 4


def _writer(url: str, name: str, batches: int, size: int) -> None:
    async def run() -> None:
        database = open_database(url)
        store = database.session("shared")
        for batch in range(batches):
            messages = turns(size, start=batch * size, topic=f"{name}-{batch}")
            while True:
                try:
                    await store.append(messages)
                    break
                except HistoryStoreConflictError:
                    await store.load()
        await database.close()

    anyio.run(run)


def test_concurrent_processes_never_interleave_or_lose_a_message(store_target: StoreTarget) -> None:
    if not store_target.multi_writer:
        pytest.skip("a messages.json has one writer process (HistoryStoreLockedError for another)")
    context = multiprocessing.get_context("spawn")  # not fork: see _kill_trial
    workers = [context.Process(target=_writer, args=(store_target.url, f"w{i}", 8, 5)) for i in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
        assert worker.exitcode == 0

    async def check() -> None:
        database = store_target.open()
        messages = await database.session("shared").load_all()
        assert len(messages) == 3 * 8 * 5
        assert len(set(ids(messages))) == len(messages)
        topics = [str(m.parts[0].content).rsplit(" ", 1)[-1] for m in messages]  # type: ignore[union-attr]
        for start in range(0, len(topics), 5):  # every batch contiguous, in its own order
            assert len(set(topics[start : start + 5])) == 1
        await database.close()

    anyio.run(check)


def _append_forever(url: str, acks: Connection) -> None:
    async def run() -> None:
        store = open_database(url).session("killed")
        batch = 0
        while True:
            messages = turns(20, start=batch * 20)
            for message in messages:
                message.parts[0].content += " " + "x" * 2000  # type: ignore[union-attr]
            await store.append(messages)
            acks.send(get_message_id(messages[-1]))
            batch += 1

    anyio.run(run)


def test_a_writer_killed_mid_append_leaves_no_partial_message(store_target: StoreTarget) -> None:
    _kill_trial(store_target, 0)


@pytest.mark.faults
@pytest.mark.parametrize("trial", range(1, 11))
def test_a_writer_killed_mid_append_leaves_no_partial_message_10_trials(store_target: StoreTarget, trial: int) -> None:
    _kill_trial(store_target, trial)


def _kill_trial(store_target: StoreTarget, trial: int) -> None:
    # spawn, not fork: a forked child of a process with worker threads can inherit a held lock and hang.
    context = multiprocessing.get_context("spawn")
    reader, writer = context.Pipe(duplex=False)
    worker = context.Process(target=_append_forever, args=(store_target.url, writer))
    worker.start()
    writer.close()
    assert reader.poll(300), "the writer acknowledged no append within 300 s"
    time.sleep(0.05 + (trial * 0.0371) % 0.4)  # then kill it somewhere in a later append
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)
    worker.join()
    acked: list[str] = []
    with contextlib.suppress(EOFError, OSError, pickle.UnpicklingError):
        while reader.poll(0):
            acked.append(reader.recv())
    reader.close()
    assert acked

    async def check(database: HistoryDatabase) -> None:
        messages = await database.session("killed").load_all()
        recorded = ids(messages)
        assert set(acked) <= set(recorded)  # every acknowledged batch is there
        assert len(set(recorded)) == len(messages)
        unacknowledged = len(messages) - 20 * len(acked)
        if store_target.atomic_batches:
            assert unacknowledged in (0, 20)  # whole batches only (the killed append committed or not)
        else:  # whole records only: at most the one append not acknowledged, or the first records of it if it was cut
            assert 0 <= unacknowledged <= 20
            assert recorded[: 20 * len(acked)][-1] == acked[-1]
        await database.close()

    anyio.run(check, store_target.open())
