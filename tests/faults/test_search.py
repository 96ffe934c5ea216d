"""Fault-injection tier for history search: concurrent searches on fresh indexes (tasks, threads, processes) and
corrupt index files. Every round must end with exactly one index row per message and correct results."""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from pydantic_deep.history_search import HistoryArchiveSearch
from summarization_pydantic_ai import JsonHistoryStore, ensure_message_id

pytestmark = pytest.mark.faults

MESSAGES = 1_000
ROUNDS = 20
SEARCHES = 8
ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, count: int = MESSAGES) -> None:
    messages: list[ModelMessage] = [
        ModelResponse(parts=[TextPart(f"reply number{i} about topic")])
        if i % 2
        else ModelRequest(parts=[UserPromptPart(f"question number{i} about topic")])
        for i in range(count)
    ]
    for message in messages:
        ensure_message_id(message)
    store = JsonHistoryStore.open(path)
    try:
        store.append_sync(messages)
    finally:
        store.close()


def _rows(path: Path) -> tuple[int, int]:
    db = sqlite3.connect(path.with_name(path.name + ".index.sqlite"))
    try:
        rows, distinct = db.execute("SELECT COUNT(*), COUNT(DISTINCT message_id) FROM docs").fetchone()
        return int(rows), int(distinct)
    finally:
        db.close()


def _concurrent_round(path: Path) -> tuple[int, int, int]:
    """SEARCHES searches at once on a fresh index: half asyncio tasks on one loop sharing one
    `HistoryArchiveSearch`, half threads with their own loops and instances. (duplicated, missing, wrong results)"""
    shown: list[int] = []
    barrier = threading.Barrier(SEARCHES // 2 + 1)

    def in_thread(i: int) -> None:
        search = HistoryArchiveSearch(messages_path=path)
        barrier.wait()
        shown.append(asyncio.run(search.search(f"number{i * 97}")).total_shown)
        search.index_for(path).close()

    async def in_tasks() -> list[int]:
        search = HistoryArchiveSearch(messages_path=path)
        await asyncio.to_thread(barrier.wait)
        results = await asyncio.gather(*(search.search(f"number{i * 89}") for i in range(SEARCHES // 2)))
        search.index_for(path).close()
        return [r.total_shown for r in results]

    threads = [threading.Thread(target=in_thread, args=(i,)) for i in range(SEARCHES // 2)]
    for thread in threads:
        thread.start()
    shown += asyncio.run(in_tasks())
    for thread in threads:
        thread.join()
    rows, distinct = _rows(path)
    return rows - distinct, MESSAGES - distinct, sum(1 for total in shown if total != 1) + SEARCHES - len(shown)


def test_concurrent_searches_on_fresh_indexes_index_each_message_once(tmp_path: Path) -> None:
    """ROUNDS rounds of SEARCHES concurrent searches, each round on a fresh index of MESSAGES messages."""
    totals = [0, 0, 0]
    for round_ in range(ROUNDS):
        path = tmp_path / f"r{round_}" / "messages.json"
        _write(path)
        for k, count in enumerate(_concurrent_round(path)):
            totals[k] += count
    assert totals == [0, 0, 0]  # duplicated rows, missing messages, wrong results


_CHILD = """
import asyncio, sys
from pathlib import Path
from pydantic_deep.history_search import HistoryArchiveSearch
path = Path(sys.argv[1])
print(asyncio.run(HistoryArchiveSearch(messages_path=path).search(sys.argv[2])).total_shown)
"""


def test_two_processes_searching_a_fresh_index_index_each_message_once(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for round_ in range(2):
        path = tmp_path / f"p{round_}" / "messages.json"
        _write(path, 2_000)
        children = [
            subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(path), f"number{i * 501}"], env=env, stdout=subprocess.PIPE
            )
            for i in range(2)
        ]
        outputs = [child.communicate(timeout=120)[0].decode().strip() for child in children]
        assert [child.returncode for child in children] == [0, 0]
        assert outputs == ["1", "1"]
        assert _rows(path) == (2_000, 2_000)


def _corrupt(index_file: Path, how: str, rng: random.Random) -> None:
    data = bytearray(index_file.read_bytes())
    if how == "header":
        data[:100] = rng.randbytes(100)
    elif how == "truncated":
        del data[len(data) // 3 :]
    elif how == "garbage":
        index_file.write_bytes(rng.randbytes(len(data)))
        return
    else:  # random pages overwritten
        for _ in range(8):
            at = rng.randrange(0, max(1, len(data) - 512))
            data[at : at + 512] = rng.randbytes(512)
    index_file.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["header", "truncated", "garbage", "pages"])
async def test_a_corrupt_index_file_is_rebuilt(tmp_path: Path, how: str) -> None:
    rng = random.Random(how)
    failures = 0
    for trial in range(10):
        path = tmp_path / f"{how}{trial}" / "messages.json"
        _write(path)
        search = HistoryArchiveSearch(messages_path=path)
        assert (await search.search("number500")).total_shown == 1
        search.index_for(path).close()  # checkpoints the write-ahead log into the database file
        _corrupt(path.with_name("messages.json.index.sqlite"), how, rng)
        resumed = HistoryArchiveSearch(messages_path=path)
        results = [(await resumed.search(f"number{i}")).total_shown for i in (3, 500, 999)]
        if results != [1, 1, 1] or resumed.index_for(path).indexed_records() != MESSAGES:
            failures += 1
        resumed.index_for(path).close()
    assert failures == 0
