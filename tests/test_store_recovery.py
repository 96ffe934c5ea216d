"""The store under damage: only damaged records are lost and every damage is reported; the lock cannot be
bypassed; every failure is a HistoryStoreError; edited messages are recorded as new versions."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from test_store import dumped, make_messages

from summarization_pydantic_ai import (
    MESSAGE_ID_KEY,
    HistoryStoreError,
    HistoryStoreLockedError,
    JsonHistoryStore,
    ensure_message_id,
    get_message_id,
    read_records,
)


def _written(path: Path, n: int) -> tuple[list[Any], bytes]:
    messages = make_messages(n)
    store = JsonHistoryStore(path)
    store.append_sync(messages)
    store.close()
    return messages, path.read_bytes()


def _ids(messages: list[Any]) -> list[str | None]:
    return [get_message_id(m) for m in messages]


def test_a_one_byte_torn_append_keeps_the_previous_record(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    messages, data = _written(path, 6)
    assert data.endswith(b"\n]\n")
    path.write_bytes(data[:-3] + b"," + data[-2:])  # the first byte of the next append, then the disk was full
    store = JsonHistoryStore(path)
    assert _ids(store.load_all_sync()) == _ids(messages)
    ModelMessagesTypeAdapter.validate_json(path.read_bytes())  # repaired
    store.close()


def test_one_corrupt_byte_loses_only_its_record_and_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "messages.json"
    messages, data = _written(path, 20)
    tenth = read_records(path).records[10].offset
    corrupt = bytearray(data)
    corrupt[tenth + 30] ^= 0x01
    path.write_bytes(bytes(corrupt))

    report = JsonHistoryStore.reader(path).verify()
    assert path.read_bytes() == bytes(corrupt)  # verify changes nothing
    assert report.records == 19 and report.records_lost == 1 and not report.ok
    assert report.damaged[0].start <= tenth + 30 < report.damaged[0].end and not report.damaged[0].torn
    assert [r.message_id for r in read_records(path).records] == _ids(messages[:10] + messages[11:])

    with caplog.at_level(logging.WARNING, logger="summarization_pydantic_ai.store"):
        store = JsonHistoryStore(path)
        assert _ids(store.load_all_sync()) == _ids(messages[:10] + messages[11:])
    assert str(path) in caplog.text and f"bytes {tenth}-" in caplog.text
    assert store.recovered_from is not None and store.recovered_from.read_bytes() == bytes(corrupt)
    assert store.last_report is not None and store.last_report.kept_copy == store.recovered_from
    assert store.verify().ok  # the rewritten file is clean and a valid JSON array
    ModelMessagesTypeAdapter.validate_json(path.read_bytes())
    store.append_sync(messages)  # the lost record can be appended again; nothing else is duplicated
    assert sorted(map(str, _ids(store.load_all_sync()))) == sorted(map(str, _ids(messages)))
    store.close()


def test_repair_on_demand_keeps_every_good_record(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    messages, data = _written(path, 10)
    records = read_records(path).records
    damaged = bytearray(data)
    for index in (2, 7):
        damaged[records[index].offset + 5] = ord("#")
    path.write_bytes(bytes(damaged))
    report = JsonHistoryStore(path).repair()
    assert report.records == 8 and report.records_lost == 2 and len(report.damaged) == 2
    assert report.kept_copy is not None and report.kept_copy.read_bytes() == bytes(damaged)
    kept = [m for i, m in enumerate(messages) if i not in (2, 7)]
    assert _ids(ModelMessagesTypeAdapter.validate_json(path.read_bytes())) == _ids(kept)


def test_files_of_format_1_without_checksums_still_load_and_grow(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    old = make_messages(4)
    path.write_bytes(b"[\n" + b",\n".join(dumped([m])[1:-1] for m in old) + b"\n]\n")
    store = JsonHistoryStore(path)
    assert dumped(store.load_all_sync()) == dumped(old) and store.recovered_from is None
    new = make_messages(2, start=4)
    assert store.append_sync(old + new) == 2
    assert dumped(ModelMessagesTypeAdapter.validate_json(path.read_bytes())) == dumped(old + new)
    store.close()


def test_deleting_the_lock_file_does_not_let_a_second_writer_in(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    holder = JsonHistoryStore(path)
    holder.append_sync(make_messages(1))
    for lock in tmp_path.glob("*.lock"):
        lock.unlink()
    with pytest.raises(HistoryStoreLockedError):
        JsonHistoryStore(path).load_all_sync()
    holder.close()
    assert len(JsonHistoryStore(path).load_all_sync()) == 1


def _raw_record(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def test_malformed_records_are_reported_not_raised_as_python_errors(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    good = make_messages(2)
    bad_parts = _raw_record({"parts": [1], "kind": "request", "metadata": {MESSAGE_ID_KEY: "bad1"}})
    path.write_bytes(b"[\n" + dumped(good[:1])[1:-1] + b",\n" + bad_parts + b",\n" + dumped(good[1:])[1:-1] + b"\n]\n")
    store = JsonHistoryStore.reader(path)
    assert _ids(store.load_all_sync()) == _ids(good)  # the malformed record is skipped (and reported)
    assert store.last_report is not None and store.last_report.records_lost == 1 and not store.last_report.ok

    invalid = _raw_record(
        {"parts": [{"part_kind": "user-prompt"}], "kind": "request", "metadata": {MESSAGE_ID_KEY: "x"}}
    )
    path.write_bytes(b"[\n" + invalid + b"\n]\n")
    with pytest.raises(HistoryStoreError, match=r"record at byte 2"):
        JsonHistoryStore.reader(path).load_all_sync()


def test_a_summary_with_malformed_provenance_loads(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    messages = make_messages(3)
    summary = _raw_record(
        {
            "parts": [
                {
                    "part_kind": "compaction",
                    "content": "s",
                    "metadata": {"summarization_pydantic_ai.summary": {"covers": 5, "dropped_messages": "x"}},
                }
            ],
            "kind": "request",
            "metadata": {MESSAGE_ID_KEY: "s1"},
        }
    )
    path.write_bytes(b"[\n" + b",\n".join([*(dumped([m])[1:-1] for m in messages), summary]) + b"\n]\n")
    store = JsonHistoryStore(path)
    assert _ids(store.load_sync()) == [*_ids(messages), "s1"]
    store.close()


class _FailingClose:
    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def fileno(self) -> int:
        return self._handle.fileno()

    def close(self) -> None:
        raise OSError(28, "No space left on device (flush on close)")


def test_a_failed_close_still_releases_the_file(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    store = JsonHistoryStore.open(path)
    store.append_sync(make_messages(2))
    store._opened.handle = _FailingClose(store._opened.handle)  # type: ignore[assignment]
    with pytest.raises(HistoryStoreError, match="closing"):
        store.close()
    reopened = JsonHistoryStore.open(path)
    assert reopened is not store and len(reopened.load_all_sync()) == 2
    reopened.close()


def test_an_edited_message_is_recorded_as_a_new_version(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    store = JsonHistoryStore(path)
    messages = make_messages(4)
    store.append_sync(messages)
    edited = dataclasses.replace(messages[1], parts=[TextPart("corrected answer")])
    assert store.append_sync([*messages[:1], edited, *messages[2:]]) == 1
    assert store.append_sync([edited]) == 0  # unchanged since: nothing written
    assert len(store) == 4 and len(read_records(path).records) == 5  # the file keeps both versions
    for loaded in (store.load_all_sync(), store.load_sync(), store.read_sync().messages):
        assert _ids(loaded) == _ids(messages)
        assert loaded[1].parts[0].content == "corrected answer"  # type: ignore[union-attr]
    store.close()
    reopened = JsonHistoryStore(path)
    assert reopened.load_all_sync()[1].parts[0].content == "corrected answer"  # type: ignore[union-attr]
    assert len(reopened) == 4
    reopened.close()


def test_lone_surrogates_from_non_utf8_names_do_not_end_the_run(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    store = JsonHistoryStore(path)
    name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
    message = ModelRequest(parts=[UserPromptPart(f"files: {name} and \ud800")])
    ensure_message_id(message)
    assert store.append_sync([message]) == 1
    assert store.append_sync([message]) == 0  # the escaped form is stable: no new version each time
    loaded = store.load_all_sync()[0].parts[0].content  # type: ignore[union-attr]
    assert loaded == "files: caf\\xe9.txt and \\ud800"  # escaped, the original bytes readable
    store.close()


def test_a_message_that_cannot_be_serialized_is_the_stores_error(tmp_path: Path) -> None:
    store = JsonHistoryStore(tmp_path / "messages.json")
    message = ModelResponse(parts=[ToolCallPart("tool", {"handle": object()})])
    ensure_message_id(message)
    with pytest.raises(HistoryStoreError, match="cannot be recorded"):
        store.append_sync([message])
    assert store.append_sync(make_messages(1)) == 1  # the store goes on
    store.close()


def test_a_repair_keeps_every_good_record_at_its_offset_for_readers_that_follow_the_file(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    _, data = _written(path, 12)
    before = read_records(path)  # a follower (the search index) has read up to here
    middle = before.records[6].offset
    corrupt = bytearray(data)
    corrupt[middle + 40] ^= 0x04
    path.write_bytes(bytes(corrupt))
    store = JsonHistoryStore(path)
    assert len(store.load_all_sync()) == 11  # opening for writing repaired the file
    after = read_records(path)
    assert [(r.offset, r.message_id) for r in after.records] == [
        (r.offset, r.message_id) for i, r in enumerate(before.records) if i != 6
    ]
    assert store.verify().ok
    ModelMessagesTypeAdapter.validate_json(path.read_bytes())
    new = make_messages(2, start=12)
    store.append_sync(new)
    assert [r.message_id for r in read_records(path, before.next_offset).records] == _ids(new)
    store.close()


@pytest.mark.parametrize("bad", [None, "3", [3], -1])
async def test_a_window_marker_with_a_malformed_count_is_read_back_and_processed(tmp_path: Path, bad: object) -> None:
    from test_processors import tool_loop

    from summarization_pydantic_ai import SUMMARY_METADATA_KEY, SlidingWindowProcessor, summary_part, validate_history

    processor = SlidingWindowProcessor(trigger=("messages", 20), keep=6)
    once = await processor(tool_loop(15))
    part = summary_part(once[1])
    assert part is not None and part.metadata is not None
    part.metadata[SUMMARY_METADATA_KEY]["dropped_messages"] = bad  # a marker edited by hand or another tool
    for message in once:
        ensure_message_id(message)
    store = JsonHistoryStore(tmp_path / "messages.json")
    store.append_sync(once)
    loaded = store.load_sync()
    store.close()
    twice = await processor([*loaded, *tool_loop(10, system=False)[1:]])
    assert validate_history(twice) == [] and len(twice) < len(loaded) + 19


def test_records_encoded_by_another_version_are_not_recorded_again(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    old = make_messages(6)
    spaced = [json.dumps(json.loads(dumped([m])[1:-1]), indent=None).encode() for m in old]  # other separators
    path.write_bytes(b"[\n" + b",\n".join(spaced) + b"\n]\n")
    size = path.stat().st_size
    store = JsonHistoryStore(path)
    assert store.append_sync(old) == 0  # the same messages: no new versions
    assert path.stat().st_size == size
    edited = dataclasses.replace(old[2], parts=[UserPromptPart("changed")])
    assert store.append_sync([edited]) == 1
    store.close()
