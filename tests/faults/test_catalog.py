"""Writers killed between the record write and the catalogue write, at random points: the listing is never wrong.

A single-threaded helper process (spawned once: importing the library costs more than a trial) forks one writer per
trial. The writer continues the same session, appending batches of every shape (priced answers, tool exchanges,
summaries, edits), and dies by SIGKILL at a random point: right after an append's records are written and before
its catalogue is (messages.json: the sidecar; SQLite: inside the append's transaction), half-way through writing
the sidecar, or at a random moment. After each trial the listing is compared with what the records hold, worked out
without the catalogue. Two writers are killed per trial: the second starts from the catalogue the first left.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage
from stores.helpers import edited, expected, priced, summary, tool_exchange, view

from pydantic_deep import SessionManager
from summarization_pydantic_ai import JsonHistoryStore, read_catalog, read_records
from summarization_pydantic_ai.store import SQLiteHistoryDatabase

pytestmark = pytest.mark.faults

TRIALS = 100
MODES = ("between", "torn", "anytime")


def _batches(rng: random.Random, start: int, previous: list[ModelMessage]) -> list[ModelMessage]:
    """One append: new turns (priced by one of two models), sometimes a tool exchange, a summary, an edit."""
    batch = priced(rng.choice((1, 2, 4)), start, model=rng.choice(("gpt-4o", "gpt-4o-mini")))
    shape = rng.random()
    if shape < 0.15:
        batch += tool_exchange("grep", f"result {start}")
    elif shape < 0.3 and len(previous) > 4:
        batch.append(summary(previous[:2], before=previous, after=previous[2:]))
    elif shape < 0.45 and previous:
        batch.append(edited(previous[rng.randrange(len(previous))], f"edited at {start}"))
    return batch


def _write_until_killed(kind: str, path: str, seed: int, mode: str) -> None:
    """The forked writer: append forever; die as `mode` says (the helper kills it for 'anytime')."""
    rng = random.Random(seed)
    die_at = rng.randrange(1, 6)
    appends = 0

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    if kind == "file":
        from summarization_pydantic_ai.store import _catalog_file

        commit, write_in_place = _catalog_file.FileCatalogWriter.commit, _catalog_file._write_in_place  # pyright: ignore[reportPrivateUsage]

        def commit_or_die(self: Any, pending: Any, handle: Any) -> None:
            if mode == "between" and appends + 1 == die_at:
                die()  # the records are written, the catalogue is not
            commit(self, pending, handle)

        def torn(target: Path, data: bytes) -> None:
            if mode == "torn" and appends + 1 == die_at:
                with open(target, "r+b" if target.exists() else "wb") as handle:
                    handle.write(data[: rng.randrange(len(data))])
                    handle.flush()
                die()
            write_in_place(target, data)

        _catalog_file.FileCatalogWriter.commit = commit_or_die  # type: ignore[method-assign]
        _catalog_file._write_in_place = torn  # pyright: ignore[reportPrivateUsage]
        store: Any = JsonHistoryStore(path)
    else:
        from summarization_pydantic_ai.store._sqlite import _store as sqlite_store

        write_catalog = sqlite_store.write_catalog

        def catalogue_or_die(*args: Any) -> None:
            if mode != "anytime" and appends + 1 == die_at:
                die()  # inside the append's transaction, between its records and its catalogue row
            write_catalog(*args)

        sqlite_store.write_catalog = catalogue_or_die
        store = SQLiteHistoryDatabase(path).session("s")
    previous = store.load_all_sync()
    while True:
        batch = _batches(rng, 1_000 * seed + 10 * appends, previous)
        store.append_sync(batch)
        previous = [*previous, *batch][-12:]
        appends += 1
        if mode != "anytime" and appends == die_at:
            die()  # the catalogue was not written (the writer had none it could trust to go on from)


def _helper(requests: Connection) -> None:
    """Single-threaded: forks each trial's writer (a fork of a process with threads could inherit a held lock)."""
    requests.send("ready")
    while (request := requests.recv()) is not None:
        kind, path, seed, mode = request
        pid = os.fork()
        if pid == 0:
            try:
                _write_until_killed(kind, path, seed, mode)
            finally:
                os._exit(1)
        if mode == "anytime":
            time.sleep(random.Random(seed).uniform(0.02, 0.25))
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        requests.send(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)


def _truth(kind: str, path: Path) -> tuple[Any, ...]:
    if kind == "file":
        return expected([record.message for record in read_records(path).records])
    database = SQLiteHistoryDatabase(path)
    try:
        return expected(database.session("s").load_versions_sync())
    finally:
        database.close_sync()


def _listed(kind: str, path: Path) -> tuple[Any, ...]:
    if kind == "file":
        entry = read_catalog(path)
        assert entry is not None
        return view(entry)
    import anyio

    async def listing() -> tuple[Any, ...]:
        database = SQLiteHistoryDatabase(path)
        try:
            [entry] = await database.catalog()
            return view(entry)
        finally:
            await database.close()

    return anyio.run(listing)


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_writers_killed_between_the_record_and_the_catalogue_writes_never_make_a_listing_wrong(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "sessions" / "s" / "messages.json" if kind == "file" else tmp_path / "history.db"
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    helper = context.Process(target=_helper, args=(theirs,))
    helper.start()
    assert ours.poll(600) and ours.recv() == "ready", "the helper process did not start within 600 s"
    wrong: list[str] = []
    modes: dict[str, int] = dict.fromkeys(MODES, 0)
    try:
        for trial in range(TRIALS):
            for writer in range(2):  # the second starts from the catalogue the first left behind
                seed = 2 * trial + writer
                mode = MODES[seed % len(MODES)]
                ours.send((kind, str(path), seed, mode))
                assert ours.poll(120), f"trial {trial}: the writer was not killed within 120 s"
                assert ours.recv() is True, f"trial {trial}: the writer ended without being killed"
                modes[mode] += 1
            if _listed(kind, path) != _truth(kind, path):
                wrong.append(f"trial {trial} ({mode})")
    finally:
        ours.send(None)
        helper.join(30)
    assert wrong == [], f"{len(wrong)} wrong listings in {TRIALS} trials: {wrong}"
    assert min(modes.values()) >= 2 * TRIALS // len(MODES)
    if kind == "file":  # and the manager lists the same (the session's folder, its catalogue)
        [info] = SessionManager(tmp_path).list()
        assert (info.message_count, info.compactions, info.first_prompt, info.model, info.cost) == _truth(kind, path)
