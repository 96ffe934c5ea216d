"""The messages.json store: append-only format, recovery after a kill at any byte, the lock, paging, load()."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)

from summarization_pydantic_ai import (
    HistoryStoreError,
    HistoryStoreLockedError,
    JsonHistoryStore,
    ensure_message_id,
    get_message_id,
)


def make_messages(n: int, start: int = 0) -> list[ModelMessage]:
    messages: list[ModelMessage] = []
    for i in range(start, start + n):
        if i % 2 == 0:
            message: ModelMessage = ModelRequest(
                parts=[UserPromptPart(f'question {i}: {{"json": [1, 2]}}\nsecond line')]
            )
        else:
            message = ModelResponse(parts=[TextPart(f"answer {i} " + "é" * (i % 50))])
        ensure_message_id(message)
        messages.append(message)
    return messages


def dumped(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def test_appends_are_recorded_once_in_order_and_load_as_json(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    store = JsonHistoryStore(path)
    messages = make_messages(10)
    assert store.append_sync(messages[:4]) == 4
    assert store.append_sync(messages) == 6  # the first four are not recorded twice
    assert store.append_sync(messages[3:7]) == 0
    loaded = ModelMessagesTypeAdapter.validate_json(path.read_bytes())
    assert dumped(loaded) == dumped(messages)
    assert [get_message_id(m) for m in store.load_all_sync()] == [get_message_id(m) for m in messages]
    store.close()
    reopened = JsonHistoryStore(path)
    assert len(reopened.load_all_sync()) == 10
    reopened.close()


def test_an_append_writes_only_the_new_records(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    store = JsonHistoryStore(path)
    store.append_sync(make_messages(200))
    before = path.stat().st_size
    new = make_messages(2, start=200)
    store.append_sync(new)
    growth = path.stat().st_size - before
    checksum = len(',"crc32":"12345678"')
    assert growth == sum(len(dumped([m])) - 2 + checksum for m in new) + 2 * len(",\n")
    store.close()


def test_a_message_without_an_id_is_refused(tmp_path: Path) -> None:
    store = JsonHistoryStore(tmp_path / "messages.json")
    with pytest.raises(HistoryStoreError, match="needs an id"):
        store.append_sync([ModelRequest(parts=[UserPromptPart("no id")])])
    store.close()


def test_read_pages_the_originals_between_two_ids(tmp_path: Path) -> None:
    store = JsonHistoryStore(tmp_path / "messages.json")
    messages = make_messages(30)
    store.append_sync(messages)
    start, end = get_message_id(messages[5]), get_message_id(messages[24])
    page = store.read_sync(start, end, limit=8)
    assert page.total == 20 and page.next_offset == 8
    assert dumped(page.messages) == dumped(messages[5:13])
    last = store.read_sync(start, end, offset=16, limit=8)
    assert last.next_offset is None and dumped(last.messages) == dumped(messages[21:25])
    with pytest.raises(HistoryStoreError, match="no message with id"):
        store.read_sync("nope")
    with pytest.raises(HistoryStoreError, match="comes after"):
        store.read_sync(end, start)
    with pytest.raises(HistoryStoreError, match="limit"):
        store.read_sync(start, end, limit=0)
    store.close()


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 17, 100, 333])
def test_a_torn_tail_is_recovered_and_the_original_kept(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "messages.json"
    store = JsonHistoryStore(path)
    messages = make_messages(6)
    store.append_sync(messages)
    store.close()
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    recovered = JsonHistoryStore(path)
    loaded = recovered.load_all_sync()
    complete = len(loaded)
    assert dumped(loaded) == dumped(messages[:complete])
    if cut <= 3:  # only framing bytes lost: every record is kept
        assert complete == 6
    else:  # only the torn record is lost
        assert complete == 5
    if cut == 1:  # only the final newline lost: nothing to repair
        assert recovered.recovered_from is None
    else:
        assert recovered.recovered_from is not None and recovered.recovered_from.read_bytes() == data[:-cut]
    ModelMessagesTypeAdapter.validate_json(path.read_bytes())
    recovered.append_sync(messages)  # appending after recovery goes on where the valid prefix ends
    assert dumped(ModelMessagesTypeAdapter.validate_json(path.read_bytes())) == dumped(messages)
    recovered.close()


def test_a_foreign_json_array_is_imported_with_ids(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    plain = [ModelRequest(parts=[UserPromptPart("hi")]), ModelResponse(parts=[TextPart("hello")])]
    path.write_bytes(ModelMessagesTypeAdapter.dump_json(plain, indent=2))
    store = JsonHistoryStore(path)
    loaded = store.load_all_sync()
    assert [m.parts[0].content for m in loaded] == ["hi", "hello"]  # type: ignore[union-attr]
    assert all(get_message_id(m) for m in loaded)
    assert (tmp_path / "messages.json.imported").exists()
    store.close()


def test_garbage_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    path.write_text("this is not json")
    with pytest.raises(HistoryStoreError, match="move it away"):
        JsonHistoryStore(path).load_all_sync()


def _hold_lock(path: str, ready: multiprocessing.synchronize.Event, release_after: float) -> None:
    store = JsonHistoryStore(path)
    store.append_sync(make_messages(1))
    ready.set()
    time.sleep(release_after)
    store.close()


def test_a_second_process_gets_a_clear_error_or_waits(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    path = str(tmp_path / "messages.json")
    ready = context.Event()
    holder = context.Process(target=_hold_lock, args=(path, ready, 1.0))
    holder.start()
    assert ready.wait(10)
    with pytest.raises(HistoryStoreLockedError, match="another process"):
        JsonHistoryStore(path).load_all_sync()
    waiting = JsonHistoryStore(path, lock_timeout=10)
    assert len(waiting.load_all_sync()) == 1  # waited for the holder to finish
    waiting.close()
    holder.join(10)


def _append_forever(path: str, ack_fd: int) -> None:
    store = JsonHistoryStore(path)
    n = 0
    while True:
        batch = make_messages(random.randint(1, 3), start=n)
        store.append_sync(batch)
        n += len(batch)
        os.write(ack_fd, f"{n}\n".encode())


def _kill_trials(tmp_path: Path, trials: int) -> None:
    context = multiprocessing.get_context("fork")
    rng = random.Random(1234)
    for trial in range(trials):
        path = str(tmp_path / f"crash{trial}" / "messages.json")
        read_fd, write_fd = os.pipe()
        child = context.Process(target=_append_forever, args=(path, write_fd))
        child.start()
        os.close(write_fd)
        deadline = time.monotonic() + rng.uniform(0.005, 0.12)
        acked, buffer = 0, b""
        os.set_blocking(read_fd, False)
        while time.monotonic() < deadline or acked == 0:
            try:
                buffer += os.read(read_fd, 65536)
            except BlockingIOError:
                time.sleep(0.001)
            lines = buffer.split(b"\n")
            acked = int(lines[-2]) if len(lines) > 1 else acked
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join()
        with contextlib.suppress(BlockingIOError):
            buffer += os.read(read_fd, 1 << 20)
        os.close(read_fd)
        lines = [line for line in buffer.split(b"\n") if line]
        acked = int(lines[-1]) if lines else 0
        store = JsonHistoryStore(path)
        recovered = store.load_all_sync()
        store.close()
        assert len(recovered) >= acked, f"trial {trial}: {len(recovered)} recovered, {acked} acknowledged"
        expected = make_messages(len(recovered))
        assert [m.parts[0].content for m in recovered] == [m.parts[0].content for m in expected]  # type: ignore[union-attr]
        json.loads(Path(path).read_bytes())  # the file on disk is a valid JSON array


def test_killed_writer_loses_no_acknowledged_message(tmp_path: Path) -> None:
    _kill_trials(tmp_path, trials=25)


@pytest.mark.slow
def test_killed_writer_loses_no_acknowledged_message_200_trials(tmp_path: Path) -> None:
    _kill_trials(tmp_path, trials=200)


async def test_async_api_and_working_context_without_summaries(tmp_path: Path) -> None:
    store = JsonHistoryStore.open(tmp_path / "messages.json")
    assert JsonHistoryStore.open(tmp_path / "messages.json") is store
    messages = make_messages(8)
    assert await store.append(messages) == 8
    assert dumped(await store.load()) == dumped(messages)
    page = await store.read(get_message_id(messages[2]), get_message_id(messages[3]))
    assert len(page.messages) == 2
    assert store.size_bytes() == (tmp_path / "messages.json").stat().st_size
    store.close()
