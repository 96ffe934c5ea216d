"""The chat in-process, its input piped: slash commands, what they print, and what they leave in the session files."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path

import pytest

from pydantic_deep import SessionManager
from pydantic_deep.cli import main
from summarization_pydantic_ai import JsonHistoryStore, get_message_id, is_summary_message, summary_info

from .conftest import run_cli

pytestmark = pytest.mark.usefixtures("no_keys")


def _only_session(root: Path) -> str:
    [folder] = (root / ".pydantic-deep" / "sessions").iterdir()
    return folder.name


def _records(root: Path, session_id: str) -> list[object]:
    return list(
        JsonHistoryStore.reader(root / ".pydantic-deep" / "sessions" / session_id / "messages.json").load_all_sync()
    )


TURNS = "hello\nread /notes.txt\nwhat next?\n"


def test_context_compact_and_search(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = TURNS + "/context\n/compact keep the pool facts\n/context\n/search pool size\n/quit\n"
    result = run_cli(["chat", "--model", "test"], capsys, monkeypatch, stdin=script)
    assert result.status == 0, result.err
    out = result.out
    session_id = _only_session(project)
    assert "You said: hello" in out and "→ read_file" in out and "The pool size is 10." in out
    # /context: the bar, tokens / max, threshold, messages, compactions, history file and size
    first = out.split("› /context", 1)[1]
    assert re.search(r"Tokens\s+~[\d,]+ / 16,000", first)
    assert "Threshold   90% (compaction at ~14,400 tokens)" in first
    assert "Messages    8 in the working context" in first and "Compactions 0 in this session" in first
    assert f"sessions/{session_id}/messages.json (" in first and " KB)" in first
    # the ContextMetrics summary of this chat: 3 runs, their requests, no reduction yet
    assert "Metrics (this chat)" in first and re.search(r"Requests    \d+ in 3 run\(s\); largest ~[\d,]+ tokens", first)
    assert "Reductions  0:" in first
    # /compact with a focus: before -> after, what was preserved, and that no LLM wrote it
    compact = out.split("› /compact keep the pool facts", 1)[1]
    assert re.search(r"Compacted: ~[\d,]+ → ~[\d,]+ tokens of messages; \d+ messages summarized", compact)
    assert "Focus: keep the pool facts" in compact and "Preserved in the summary:" in compact
    assert "deterministic summarizer" in compact
    after = out.split("› /context", 2)[2]
    assert "Compactions 1 in this session" in after and "(messages only, estimated" in after
    assert re.search(r"Reductions  1: ~[\d,]+ tokens removed, \d+% per reduction on average", after)
    assert "by ContextManagerMiddleware x1" in after
    records = _records(project, session_id)
    [summary] = [m for m in records if is_summary_message(m)]  # type: ignore[arg-type]
    assert (summary_info(summary) or {}).get("focus") == "keep the pool facts"  # type: ignore[arg-type]
    assert len(records) == 9  # every message is still in the file, and the summary is added
    # /search reads the very file the session is saved to
    assert "Matches for 'pool size'" in out.split("› /search pool size", 1)[1]
    assert f"Session {session_id} saved. Resume: pydantic-deep chat --resume {session_id}" in out


def test_resume_after_exit_continues_the_same_file(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli(["chat", "--model", "test"], capsys, monkeypatch, stdin=TURNS).status == 0
    session_id = _only_session(project)
    before = _records(project, session_id)
    result = run_cli(["chat", "--resume", session_id, "--model", "test"], capsys, monkeypatch, stdin="again\n")
    assert result.status == 0 and f"session {session_id} (resumed, 8 messages" in result.out
    after = _records(project, session_id)
    assert [get_message_id(m) for m in after[: len(before)]] == [get_message_id(m) for m in before]  # type: ignore[arg-type]
    assert len(after) == len(before) + 2 and _only_session(project) == session_id


def test_fork_checkpoint_and_rewind(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "hello\n/checkpoint first-hello\nread /notes.txt\n/fork\n/quit\n"
    result = run_cli(["chat", "--model", "test"], capsys, monkeypatch, stdin=script)
    assert result.status == 0, result.err
    checkpoint = re.search(r"Checkpoint (\w+) \(first-hello\) at message 2", result.out)
    fork = re.search(r"Forked (\w+) → (\w+) \((\d+) messages\)", result.out)
    assert checkpoint and fork
    original, copy = fork.group(1), fork.group(2)
    manager = SessionManager()
    assert manager.get(copy).message_count == manager.get(original).message_count == 6
    assert json.loads((project / ".pydantic-deep" / "sessions" / original / "checkpoints.json").read_text())
    # Rewind in a later chat: a new session holding the history at the checkpoint; the original keeps the rest.
    script = f"/rewind\n/rewind {checkpoint.group(1)}\n/context\n/rewind ../evil\n/quit\n"
    result = run_cli(["chat", "--resume", original, "--model", "test"], capsys, monkeypatch, stdin=script)
    assert result.status == 0, result.err
    assert "first-hello" in result.out.split("› /rewind\n", 1)[1]  # the listing
    rewound = re.search(
        rf"Rewound to checkpoint {checkpoint.group(1)}: 2 messages, in the new session (\w+)", result.out
    )
    assert rewound and "Messages    2 in the working context" in result.out
    assert "Cannot rewind:" in result.out.split("› /rewind ../evil", 1)[1]
    assert manager.get(rewound.group(1)).message_count == 2 and manager.get(original).message_count == 6


def test_memory_help_unknown_and_an_empty_chat_leaves_nothing(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_cli(["chat", "--model", "test"], capsys, monkeypatch, stdin="/memory\n/help\n/frobnicate\n/quit\n")
    assert result.status == 0
    assert "Memory is empty" in result.out and "/compact [focus]" in result.out
    assert "Unknown command /frobnicate; /help lists the commands." in result.out
    assert SessionManager().list() == []  # a chat that got no message leaves no session
    script = "remember pool size is 10\n/memory\n/compact\n"
    result = run_cli(["chat", "--model", "test"], capsys, monkeypatch, stdin=script)
    assert "✎ memory:" in result.out and "pool size is 10" in result.out.split("› /memory", 1)[1]
    assert "Nothing to compact: the history is already as short as the kept messages" in result.out


class _Screen(io.StringIO):
    """Standard output that signals when a text shows (the chat reads its input from a pipe meanwhile)."""

    def __init__(self, wanted: str) -> None:
        super().__init__()
        self.wanted, self.seen = wanted, threading.Event()

    def write(self, s: str) -> int:
        written = super().write(s)
        if self.wanted in self.getvalue():
            self.seen.set()
        return written

    def isatty(self) -> bool:
        return False


def test_ctrl_c_cancels_the_turn_and_keeps_the_message(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    screen = _Screen("word3")
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setattr(sys, "stdin", io.StringIO("slow\nhello after\n"))

    def interrupt() -> None:
        if screen.seen.wait(60):
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    status = main(["chat", "--model", "test"])
    thread.join(5)
    out = screen.getvalue()
    assert status == 0, out
    assert "⏹ turn cancelled; your message is kept in the history." in out
    assert "word59" not in out  # the answer stopped streaming
    assert "You said: hello after" in out  # the chat went on
    prompts = [
        part.content
        for message in _records(project, _only_session(project))
        for part in getattr(message, "parts", [])
        if getattr(part, "part_kind", "") == "user-prompt"
    ]
    assert prompts == ["slow", "hello after"]


async def test_a_model_error_is_one_line_and_keeps_the_message(tmp_path: Path) -> None:
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo
    from rich.console import Console

    from pydantic_deep.cli._models import ResolvedModel
    from pydantic_deep.cli._scripted import scripted_model
    from pydantic_deep.cli._state import ChatState
    from pydantic_deep.cli._turn import run_turn
    from pydantic_deep.cli._ui import Ui

    calls: list[int] = []

    def flaky(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        if len(calls) == 1:
            raise ModelHTTPError(429, "openai:gpt-4.1", {"error": "rate limited"})
        return ModelResponse(parts=[TextPart("back")])

    resolved = ResolvedModel("openai:gpt-4.1", scripted_model(flaky, "flaky"), None, 16_000)
    console = Console(file=io.StringIO(), width=120)
    state = ChatState(SessionManager(tmp_path / "sessions"), resolved, tmp_path, Ui(console))
    outcome = await run_turn(state, "first try")
    assert outcome.status == "failed" and outcome.error is not None
    assert "openai:gpt-4.1" in outcome.error and "429" in outcome.error and "\n" not in outcome.error
    assert [m.parts[0].content for m in state.history] == ["first try"]  # type: ignore[union-attr]
    assert (await run_turn(state, "second try")).status == "done"
    prompts = [
        p.content
        for m in JsonHistoryStore.reader(state.messages_path).load_all_sync()
        for p in m.parts
        if p.part_kind == "user-prompt"
    ]
    assert prompts == ["first try", "second try"]


async def test_two_failed_turns_in_a_row_then_the_chat_goes_on(tmp_path: Path) -> None:
    """pydantic-ai merges the two unanswered requests at the third turn's start: still the session's own."""
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo
    from rich.console import Console

    from pydantic_deep.cli._models import ResolvedModel
    from pydantic_deep.cli._scripted import scripted_model
    from pydantic_deep.cli._state import ChatState
    from pydantic_deep.cli._turn import TurnOutcome, run_turn
    from pydantic_deep.cli._ui import Ui

    sent: list[list[ModelMessage]] = []

    def fails_twice(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(messages)
        if len(sent) <= 2:
            raise ModelHTTPError(500, "openai:gpt-4.1", {"error": "server error"})
        return ModelResponse(parts=[TextPart("back")])

    resolved = ResolvedModel("openai:gpt-4.1", scripted_model(fails_twice, "fails twice"), None, 16_000)
    state = ChatState(SessionManager(tmp_path / "sessions"), resolved, tmp_path, Ui(Console(file=io.StringIO())))
    assert [(await run_turn(state, p)).status for p in ("one", "two")] == ["failed", "failed"]
    outcome = await run_turn(state, "three")
    assert outcome == TurnOutcome("done"), outcome.error
    assert (await run_turn(state, "four")).status == "done"
    user_prompts = [[p.content for m in s for p in m.parts if p.part_kind == "user-prompt"] for s in sent]
    assert user_prompts[2] == ["one", "two", "three"]
    records = JsonHistoryStore.reader(state.messages_path).load_all_sync()
    assert [p.content for m in records for p in m.parts if p.part_kind == "user-prompt"] == [
        "one",
        "two",
        "three",
        "four",
    ]
    assert [get_message_id(m) for m in records] == [get_message_id(m) for m in state.history]


async def test_compact_says_so_when_the_summary_model_fails(tmp_path: Path) -> None:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from rich.console import Console

    from pydantic_deep.cli._models import ResolvedModel
    from pydantic_deep.cli._scripted import offline_model
    from pydantic_deep.cli._slash import handle_slash
    from pydantic_deep.cli._state import ChatState
    from pydantic_deep.cli._turn import run_turn
    from pydantic_deep.cli._ui import Ui

    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("summary model down")

    screen = io.StringIO()
    resolved = ResolvedModel("test", offline_model(), FunctionModel(broken), 16_000)
    state = ChatState(SessionManager(tmp_path / "sessions"), resolved, tmp_path, Ui(Console(file=screen, width=200)))
    for prompt in ("one", "two", "three", "four"):
        assert (await run_turn(state, prompt)).status == "done"
    await handle_slash(state, "/compact")
    out = screen.getvalue()
    assert "the summary model failed" in out
    assert "this summary is a deterministic extract (trimmed), not an LLM summary" in out
    assert re.search(r"Compacted: ~[\d,]+ → ~[\d,]+ tokens of messages", out)
