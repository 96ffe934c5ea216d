"""Fault injection on the history store: torn tails at every byte, random byte corruption, lock-file deletion
under two writer processes, a full disk on append. Nothing acknowledged is lost; every damage is reported."""

from __future__ import annotations

import errno
import multiprocessing
import random
import time
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

from summarization_pydantic_ai import (
    HistoryStoreError,
    JsonHistoryStore,
    ensure_message_id,
    get_message_id,
    read_records,
)
from summarization_pydantic_ai.store import _appending

pytestmark = pytest.mark.faults


def _messages(n: int, start: int = 0, tag: str = "m") -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for i in range(start, start + n):
        message = ModelRequest(parts=[UserPromptPart(f"{tag} {i}: " + "x" * (i % 7) + ' {"k": [1]}\n é')])
        ensure_message_id(message)
        out.append(message)
    return out


def _ids(messages: list[Any]) -> list[str | None]:
    return [get_message_id(m) for m in messages]


def _file_of(tmp_path: Path, messages: list[ModelMessage]) -> bytes:
    path = tmp_path / "build" / "messages.json"
    store = JsonHistoryStore(path)
    store.append_sync(messages)
    store.close()
    return path.read_bytes()


def _open_and_check(path: Path, data: bytes, expected: list[str | None]) -> None:
    path.write_bytes(data)
    assert [r.message_id for r in read_records(path).records][: len(expected)] == expected
    store = JsonHistoryStore(path)
    loaded = _ids(store.load_all_sync())
    store.close()
    assert loaded[: len(expected)] == expected and len(loaded) <= len(expected) + 1
    ModelMessagesTypeAdapter.validate_json(path.read_bytes())  # repaired into a valid JSON array
    for kept in path.parent.glob("*.damaged-*"):
        kept.unlink()


def test_a_torn_tail_at_every_byte_of_the_last_three_records_loses_only_the_torn_one(tmp_path: Path) -> None:
    messages = _messages(50)
    path = tmp_path / "t" / "messages.json"
    path.parent.mkdir()
    trials = 0
    for n in (48, 49, 50):  # the append of record n-1 torn at every byte it writes
        before, after = _file_of(tmp_path / f"b{n}", messages[: n - 1]), _file_of(tmp_path / f"a{n}", messages[:n])
        acknowledged = _ids(messages[: n - 1])
        start = len(before) - len(b"\n]\n")
        for cut in range(start, len(after)):
            torn_append = after[:cut] + before[cut:]  # the append's first bytes over the old footer
            truncated = after[:cut]  # or the file cut there
            for data in (torn_append, truncated):
                _open_and_check(path, data, acknowledged)
                trials += 1
    assert trials > 1_000


def test_random_single_byte_corruption_loses_only_the_damaged_record_and_is_reported(tmp_path: Path) -> None:
    messages = _messages(20)
    data = _file_of(tmp_path, messages)
    starts = [r.offset for r in read_records(tmp_path / "build" / "messages.json").records]
    spans = list(zip(starts, [s - len(b",\n") for s in starts[1:]] + [len(data) - len(b"\n]\n")], strict=True))
    ids = _ids(messages)
    path = tmp_path / "c" / "messages.json"
    path.parent.mkdir()
    rng = random.Random(20261125)
    lost_records = 0
    for _ in range(1_000):
        offset = rng.randrange(len(data))
        corrupt = bytearray(data)
        corrupt[offset] = rng.choice([b for b in range(256) if b != data[offset]])
        path.write_bytes(bytes(corrupt))
        hit = next((i for i, (s, e) in enumerate(spans) if s <= offset < e), None)
        expected = [m for i, m in enumerate(ids) if i != hit]
        report = JsonHistoryStore.reader(path).verify()
        assert not report.ok, f"byte {offset} corrupted silently"  # every damage is reported
        assert report.records >= len(expected)
        assert any(d.start <= offset < d.end for d in report.damaged) or report.needs_repair
        got = [r.message_id for r in read_records(path).records]
        assert [i for i in got if i in expected] == expected  # every other record is recovered, in order
        store = JsonHistoryStore(path)
        loaded = _ids(store.load_all_sync())
        assert [i for i in loaded if i in expected] == expected and store.verify().ok
        store.close()
        assert len(loaded) >= len(ids) - 1
        lost_records += len(ids) - len(loaded)
        for kept in path.parent.glob("*.damaged-*"):
            kept.unlink()
    assert lost_records < 1_000  # a corrupt checksum key name, separator or bracket loses no record


def _writer(path: str, tag: str, count: int) -> None:
    for i in range(count):
        store = JsonHistoryStore(path, lock_timeout=60)
        store.append_sync(_messages(1, start=i, tag=tag))
        store.close()


def test_two_writer_processes_with_the_lock_file_deleted_lose_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    path = tmp_path / "messages.json"
    lock = tmp_path / "messages.json.lock"
    writers = [context.Process(target=_writer, args=(str(path), tag, 200)) for tag in ("a", "b")]
    for writer in writers:
        writer.start()
    deleted = 0
    while any(w.is_alive() for w in writers):
        try:
            lock.unlink()
            deleted += 1
        except FileNotFoundError:
            pass
        time.sleep(0.002)
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0
    assert deleted > 0
    records = ModelMessagesTypeAdapter.validate_json(path.read_bytes())  # 0 interleaved: a valid array
    assert len(records) == 400  # 0 lost
    contents = [r.parts[0].content for r in records]  # type: ignore[union-attr]
    for tag in ("a", "b"):
        assert [c.split(":")[0] for c in contents if c.startswith(tag)] == [f"{tag} {i}" for i in range(200)]


@pytest.mark.parametrize("written", [0, 1, 2, 3, 10, 150, 400])
def test_a_full_disk_on_append_keeps_earlier_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: int
) -> None:
    path = tmp_path / "messages.json"
    earlier, later = _messages(10), _messages(3, start=10)
    store = JsonHistoryStore(path)
    store.append_sync(earlier)

    def full_disk(handle: BinaryIO, data: bytes) -> None:
        handle.write(data[:written])
        handle.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_appending, "_write", full_disk)
    with pytest.raises(HistoryStoreError, match=r"at byte \d+ failed .*No space left"):
        store.append_sync(later)
    assert _ids([r.message for r in read_records(path).records]) == _ids(earlier)
    monkeypatch.undo()
    assert store.append_sync(later[:1]) == 1  # the same store goes on once there is space
    store.close()
    reopened = JsonHistoryStore(path)  # and the next open finds every acknowledged record
    assert _ids(reopened.load_all_sync()) == _ids(earlier + later[:1])
    assert reopened.append_sync(later) == 2
    assert reopened.verify().ok
    reopened.close()


def test_a_full_disk_that_also_tears_the_tail_is_recovered_on_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    earlier = _messages(10)
    store = JsonHistoryStore(path)
    store.append_sync(earlier)
    end = store.size_bytes() - 3
    store.close()
    with path.open("r+b") as handle:  # what a process killed while the disk was full leaves
        handle.seek(end)
        handle.write(b',\n{"parts":[{"content":"half')
    reopened = JsonHistoryStore(path)
    assert _ids(reopened.load_all_sync()) == _ids(earlier)
    assert reopened.last_report is not None and reopened.last_report.damaged[-1].torn
    assert reopened.append_sync(_messages(1, start=10)) == 1 and reopened.verify().ok
    reopened.close()
