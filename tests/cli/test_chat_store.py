"""`pydantic-deep chat --store URL` (or `$PYDANTIC_DEEP_STORE`): the chat on a database, SQLite in the default run
and the throwaway PostgreSQL server; the same commands and the same behaviour as on files, nothing in messages.json."""

from __future__ import annotations

import io
import itertools
import os
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo
from rich.console import Console

from pydantic_deep import SessionManager
from pydantic_deep.cli import main
from pydantic_deep.cli._models import ResolvedModel
from pydantic_deep.cli._scripted import scripted_model
from pydantic_deep.cli._state import ChatState
from pydantic_deep.cli._turn import run_turn
from pydantic_deep.cli._ui import Ui
from pydantic_deep.storage import open_storage
from summarization_pydantic_ai import (
    ensure_message_id,
    get_message_id,
    is_summary_message,
    summary_info,
    validate_history,
)
from summarization_pydantic_ai.store import redact_url

from .conftest import run_cli

pytestmark = pytest.mark.usefixtures("no_keys")


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_dsn"))
    return f"sqlite:///{tmp_path / 'agents.db'}"


def _records(url: str, session_id: str) -> list[ModelMessage]:
    async def read() -> list[ModelMessage]:
        storage = open_storage(url)
        try:
            return await storage.history.session(session_id).load_all()
        finally:
            await storage.close()

    return anyio.run(read)


def _saved(out: str) -> str:
    found = re.findall(r"Session (\w+) saved\. Resume: pydantic-deep chat --resume \1", out)
    assert found, out
    return found[-1]


def _prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


def _check(messages: list[ModelMessage]) -> None:
    assert validate_history(messages, for_request=False) == []
    ids = [get_message_id(m) for m in messages]
    assert None not in ids and len(ids) == len(set(ids))  # every message once


def test_new_chat_search_sessions_context_and_resume(
    project: Path, store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "hello\nread /notes.txt\nwhat next?\n/compact keep the pool facts\n/search pool size\n"
    script += "/sessions\n/context\n/cost\n/memory\n/quit\n"
    result = run_cli(["chat", "--model", "test", "--store", store_url], capsys, monkeypatch, stdin=script)
    assert result.status == 0, result.err
    session_id = _saved(result.out)
    assert f"history {redact_url(store_url)} (session {session_id})" in result.out
    records = _records(store_url, session_id)
    _check(records)
    assert _prompts(records) == ["hello", "read /notes.txt", "what next?"] and len(records) == 9
    [summary] = [m for m in records if is_summary_message(m)]  # /compact recorded it in the database
    assert (summary_info(summary) or {}).get("focus") == "keep the pool facts"
    assert "Every original message stays in " + redact_url(store_url) in result.out
    assert not (project / ".pydantic-deep" / "sessions" / session_id / "messages.json").exists()
    search = result.out.split("› /search pool size", 1)[1].split("› /sessions", 1)[0]
    assert "Matches for 'pool size'" in search and "The pool size is 10." in search  # found in the database
    listing = result.out.split("› /sessions", 1)[1]
    assert f"{session_id}*" in listing and "hello" in listing
    context = result.out.split("› /context", 1)[1]
    assert "Compactions 1 in this session" in context and f"(session {session_id}) (" in context
    assert "Session     unknown this session (4 requests" in result.out.split("› /cost", 1)[1]
    assert "Memory is empty (the memory of 'main' in" in result.out

    listed = run_cli(["sessions", "--store", store_url], capsys, monkeypatch)  # the same table as on files
    assert listed.status == 0 and session_id in listed.out and "hello" in listed.out and "compactions" in listed.out

    # Resume (the store from the environment this time): the same session, continued in the database.
    monkeypatch.setenv("PYDANTIC_DEEP_STORE", store_url)
    result = run_cli(["chat", "--resume", session_id, "--model", "test"], capsys, monkeypatch, stdin="again\n")
    assert result.status == 0, result.err
    resumed = re.search(rf"session {session_id} \(resumed, (\d+) messages", result.out)
    assert resumed and int(resumed.group(1)) < 8 and "You said: again" in result.out  # the compacted context
    after = _records(store_url, session_id)
    _check(after)
    assert [get_message_id(m) for m in after[:9]] == [get_message_id(m) for m in records]
    assert len(after) == 11


def test_fork_checkpoint_and_rewind_in_the_database(
    project: Path, store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ["--store", store_url]
    script = "hello\n/checkpoint first-hello\nread /notes.txt\n/fork\n/quit\n"
    result = run_cli(["chat", "--model", "test", *store], capsys, monkeypatch, stdin=script)
    assert result.status == 0, result.err
    checkpoint = re.search(r"Checkpoint (\w+) \(first-hello\) at message 2", result.out)
    fork = re.search(r"Forked (\w+) → (\w+) \((\d+) messages\)", result.out)
    assert checkpoint and fork and fork.group(3) == "6"
    original, copy = fork.group(1), fork.group(2)
    assert [get_message_id(m) for m in _records(store_url, copy)] == [
        get_message_id(m) for m in _records(store_url, original)
    ]
    storage_checkpoints = _checkpoint_ids(store_url, original)
    assert checkpoint.group(1) in storage_checkpoints  # kept in the database, not in checkpoints.json
    assert not (project / ".pydantic-deep" / "sessions" / original / "checkpoints.json").exists()

    script = f"/checkpoints\n/rewind {checkpoint.group(1)}\n/context\n/rewind ../evil\n/quit\n"
    result = run_cli(["chat", "--resume", original, "--model", "test", *store], capsys, monkeypatch, stdin=script)
    assert result.status == 0, result.err
    assert "first-hello" in result.out.split("› /checkpoints", 1)[1]
    rewound = re.search(
        rf"Rewound to checkpoint {checkpoint.group(1)}: 2 messages, in the new session (\w+)", result.out
    )
    assert rewound and "Messages    2 in the working context" in result.out
    assert "Cannot rewind:" in result.out.split("› /rewind ../evil", 1)[1]
    back = _records(store_url, rewound.group(1))
    _check(back)
    assert _prompts(back) == ["hello"] and len(_records(store_url, original)) == 6

    # --resume ID --fork: the chat continues in a copy; the original is not touched.
    result = run_cli(["chat", "--resume", original, "--fork", "--model", "test", *store], capsys, monkeypatch, "more\n")
    assert result.status == 0, result.err
    copied = re.search(rf"Forked {original} → (\w+) \(6 messages\)", result.out)
    assert copied and len(_records(store_url, copied.group(1))) == 8 and len(_records(store_url, original)) == 6


def _checkpoint_ids(url: str, session_id: str) -> list[str]:
    async def read() -> list[str]:
        storage = open_storage(url)
        try:
            return [c.id for c in await anyio.to_thread.run_sync(storage.checkpoints(session_id).list)]
        finally:
            await storage.close()

    return anyio.run(read)


def test_unknown_sessions_and_an_empty_chat(
    project: Path, store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ["--store", store_url]
    for args in (["--resume", "nosuch"], ["--resume", "nosuch", "--fork"]):
        result = run_cli(["chat", "--model", "test", *store, *args], capsys, monkeypatch)
        on_files = run_cli(["chat", "--model", "test", *args], capsys, monkeypatch)
        assert result.status == on_files.status == 1 and result.err.count("\n") == 1  # as on files
        assert f"no session 'nosuch' in {redact_url(store_url)}" in result.err
    result = run_cli(["chat", "--model", "test", *store, "--resume", "../evil"], capsys, monkeypatch)
    assert result.status == 2 and "session id" in result.err
    # A chat that got no message leaves no session behind.
    result = run_cli(["chat", "--model", "test", *store], capsys, monkeypatch, stdin="/help\n/quit\n")
    assert result.status == 0 and "Session" not in result.out.split("› /quit", 1)[1]
    assert SessionManager(store=store_url).list() == []
    assert not (project / ".pydantic-deep").exists()


def test_a_database_chat_touches_no_folder_it_does_not_need(
    project: Path, store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """History, checkpoints, memory and metadata are the database's: a chat that evicted no output and wrote no
    plan leaves nothing under the session directory (it used to leave an empty session folder behind)."""
    script = "hello\nread /notes.txt\n/checkpoint here\n/fork\n/sessions\n/quit\n"
    result = run_cli(["chat", "--model", "test", "--store", store_url], capsys, monkeypatch, stdin=script)
    assert result.status == 0, result.err
    forked = re.search(r"Forked (\w+) → (\w+)", result.out)
    assert forked and len(_records(store_url, forked.group(2))) == 6
    assert not (project / ".pydantic-deep").exists()
    manager = SessionManager(project / ".pydantic-deep", store=store_url)
    created = manager.create()
    assert created.id in {i.id for i in manager.list()} and not (project / ".pydantic-deep").exists()
    # The folder is made when something of the session has to live on this host (an evicted output).
    backend = manager.deps(created.id, workspace=project).backend
    anyio.run(backend.write, "/large_tool_results/out.txt", "evicted")
    assert (project / ".pydantic-deep" / "sessions" / created.id / "large_tool_results" / "out.txt").is_file()


def test_a_password_in_the_url_never_shows(
    project: Path, postgres_dsn: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = postgres_dsn.replace("postgresql://postgres@", "postgresql://postgres:s3cret@")
    assert "s3cret" in url  # the throwaway server trusts local connections: the password is sent, not needed
    result = run_cli(["chat", "--model", "test", "--store", url], capsys, monkeypatch, stdin="hello\n/context\n")
    assert result.status == 0, result.err
    assert "s3cret" not in result.out + result.err and f"history {redact_url(url)} (session" in result.out


def test_an_unreachable_server_fails_at_once_and_never_shows_the_password(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "postgresql://me:s3cret@127.0.0.1:9/nodb"  # nothing listens on port 9: the connection is refused
    started = time.monotonic()
    result = run_cli(["chat", "--model", "test", "--store", url], capsys, monkeypatch, stdin="hello\n")
    # Before, the connection pool retried for its 30 s timeout first.
    assert time.monotonic() - started < 10
    assert result.status == 1 and "s3cret" not in result.err + result.out
    assert result.err.count("\n") == 1 and "no connection to postgresql://me:***@127.0.0.1:9/nodb" in result.err
    assert "refused" in result.err


class _Pipe:
    """The chat's standard input, written line by line by the test while the chat runs."""

    def __init__(self) -> None:
        read, write = os.pipe()
        self.reader = os.fdopen(read, "r")
        self._writer = os.fdopen(write, "w")

    def send(self, line: str) -> None:
        self._writer.write(line + "\n")
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class _Screen(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def write(self, s: str) -> int:
        with self.changed:
            written = super().write(s)
            self.changed.notify_all()
        return written

    def wait_for(self, text: str, count: int = 1) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.getvalue().count(text) >= count, timeout=60), self.getvalue()

    def isatty(self) -> bool:
        return False


def _other_worker(url: str, session_id: str) -> list[str]:
    """Another worker continues the session meanwhile: it reads it and appends a turn of its own."""

    async def append() -> list[str]:
        storage = open_storage(url)
        try:
            store = storage.history.session(session_id)
            await store.load()
            turn: list[ModelMessage] = [
                ModelRequest(parts=[UserPromptPart("from the other worker")]),
                ModelResponse([TextPart("noted by the other worker")]),
            ]
            ids = [ensure_message_id(m) for m in turn]
            await store.append(turn)
            return ids
        finally:
            await storage.close()

    return anyio.run(append)


def test_a_second_writer_meanwhile_reloads_and_sends_the_message_again(
    project: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    screen, stdin = _Screen(), _Pipe()
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setattr(sys, "stdin", stdin.reader)
    monkeypatch.delenv("COLUMNS", raising=False)
    status: list[int] = []
    chat = threading.Thread(target=lambda: status.append(main(["chat", "--model", "test", "--store", store_url])))
    chat.start()
    try:
        stdin.send("hello")
        screen.wait_for("compacts at 90%")  # the turn is over (and recorded)
        session_id = re.findall(r"session (\w+) \(new\)", screen.getvalue())[0]
        theirs = _other_worker(store_url, session_id)
        stdin.send("and now?")
        screen.wait_for("You said: and now?")
        stdin.send("/quit")
    finally:
        stdin.close()
        chat.join(60)
    out = screen.getvalue()
    assert status == [0], out
    assert f"another writer added 2 message(s) to session {session_id} meanwhile; reloaded" in out
    records = _records(store_url, session_id)
    _check(records)
    assert _prompts(records) == ["hello", "from the other worker", "and now?"]  # nothing lost, nothing twice
    assert [get_message_id(m) for m in records[2:4]] == theirs
    assert "You said: and now?" in str(records[-1].parts[0].content)  # type: ignore[union-attr]


def _responses_in_a_row(messages: list[ModelMessage]) -> list[int]:
    pairs = itertools.pairwise(messages)
    return [i + 1 for i, (a, b) in enumerate(pairs) if isinstance(a, ModelResponse) and isinstance(b, ModelResponse)]


Answer = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


@asynccontextmanager
async def _chat(tmp_path: Path, store_url: str, answer: Answer) -> AsyncIterator[tuple[ChatState, io.StringIO]]:
    """A chat on the database (its own writer handle) whose model is `answer`, and its screen."""
    manager = SessionManager(tmp_path / "base", store=store_url)
    writer = open_storage(store_url)
    screen = io.StringIO()
    resolved = ResolvedModel("test", scripted_model(answer, "answer"), None, 16_000)
    try:
        yield (
            await ChatState.start(manager, resolved, tmp_path, Ui(Console(file=screen, width=200)), writer=writer),
            screen,
        )
    finally:
        await writer.close()
        await manager.close()


async def test_a_write_meanwhile_at_the_end_of_a_turn_rebases_the_answer_after_theirs(
    tmp_path: Path, store_url: str
) -> None:
    """The other worker appends while the model answers (this turn's prompt is recorded already, before theirs):
    the answer is shown, and recorded after theirs behind the user's prompt again, never right after their
    answer (two answers in a row, which the next run had to patch with a placeholder turn)."""
    theirs: list[str] = []
    session: list[str] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > 2 and not theirs:  # the second turn: another worker writes now
            _write_meanwhile(store_url, session[0], theirs)
        return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])

    async with _chat(tmp_path, store_url, answer) as (state, screen):
        session.append(state.id)
        assert (await run_turn(state, "one")).status == "done"
        assert (await run_turn(state, "two")).status == "done"
        assert "this turn is recorded after theirs" in screen.getvalue()
        assert state.writer is not None
        records = await state.writer.history.session(state.id).load_all()
        _check(records)
        assert _responses_in_a_row(records) == []
        assert _prompts(records) == ["one", "two", "from the other worker", "two"]
        assert [get_message_id(m) for m in records[3:5]] == theirs  # every message of both writers, once
        assert str(records[-1].parts[0].content).startswith("answer")  # type: ignore[union-attr]
        assert [get_message_id(m) for m in state.history] == [get_message_id(m) for m in records]
        assert (await run_turn(state, "three")).status == "done"  # and the chat goes on from there
        after = await state.writer.history.session(state.id).load_all()
        _check(after)
        assert [get_message_id(m) for m in after[: len(records)]] == [get_message_id(m) for m in records]
        assert _prompts(after) == ["one", "two", "from the other worker", "two", "three"]  # no placeholder turn
        assert _responses_in_a_row(after) == []


async def test_a_write_meanwhile_between_a_tool_call_and_its_answer_keeps_the_exchange_after_theirs(
    tmp_path: Path, store_url: str
) -> None:
    """The other worker appends while the model makes a tool call: recording the call and its result is refused
    (nothing of it written); they are recorded after theirs, behind the user's prompt again, and the turn says
    it stopped there."""
    theirs: list[str] = []
    session: list[str] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if _prompts([last]) == ["look"]:
            _write_meanwhile(store_url, session[0], theirs)
            return ModelResponse(parts=[ToolCallPart("ls", {"path": "/"}, tool_call_id="call-1")])
        return ModelResponse(parts=[TextPart(f"answer {len(messages)}")])

    async with _chat(tmp_path, store_url, answer) as (state, _screen):
        session.append(state.id)
        assert (await run_turn(state, "one")).status == "done"
        outcome = await run_turn(state, "look")
        assert outcome.status == "failed" and "kept after theirs" in (outcome.error or "")
        assert state.writer is not None
        records = await state.writer.history.session(state.id).load_all()
        _check(records)
        assert _responses_in_a_row(records) == [] and validate_history(records) == []
        assert _prompts(records) == ["one", "look", "from the other worker", "look"]
        assert isinstance(records[-2], ModelResponse) and records[-2].tool_calls  # the call, then its result
        assert [get_message_id(m) for m in state.history] == [get_message_id(m) for m in records]
        assert (await run_turn(state, "go on")).status == "done"
        after = await state.writer.history.session(state.id).load_all()
        _check(after)
        assert _responses_in_a_row(after) == [] and _prompts(after)[-1] == "go on"


def _write_meanwhile(url: str, session_id: str, theirs: list[str]) -> None:
    """Another worker appends a turn now (from a thread of its own: it runs its own event loop)."""
    worker = threading.Thread(target=lambda: theirs.extend(_other_worker(url, session_id)))
    worker.start()
    worker.join()


def test_memory_lives_in_the_database(
    project: Path, store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "remember pool size is 10\n/memory\n/quit\n"
    result = run_cli(["chat", "--model", "test", "--store", store_url], capsys, monkeypatch, stdin=script)
    assert result.status == 0, result.err
    assert "✎ memory:" in result.out and "pool size is 10" in result.out.split("› /memory", 1)[1]

    async def read() -> str | None:
        storage = open_storage(store_url)
        try:
            return await storage.memory.read("main")
        finally:
            await storage.close()

    assert "pool size is 10" in (anyio.run(read) or "")
    assert not list(project.glob(".pydantic-deep/*/MEMORY.md"))  # not in the file layout
