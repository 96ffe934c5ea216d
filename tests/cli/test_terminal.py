"""The real program in a pseudo-terminal (tmux), with the offline `test` model: what a person sees and types.

Each test starts Python a few times and waits for the screen, so they are in the slow tier (`pytest -m slow`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pydantic_deep import SessionManager
from summarization_pydantic_ai import JsonHistoryStore, is_summary_message, summary_info

from .conftest import Terminal, run_process

pytestmark = pytest.mark.slow


def _prompts(path: Path) -> list[str]:
    return [
        str(part.content)
        for message in JsonHistoryStore.reader(path).load_all_sync()
        for part in message.parts
        if part.part_kind == "user-prompt"
    ]


def test_a_chat_in_a_terminal(terminal: Terminal, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("The pool size is 10.\n")
    terminal.start("chat", "--model", "test")
    banner = terminal.wait_for("/help for commands")
    original = re.search(r"session (\w+) \(new\)", banner)
    assert original
    sessions = tmp_path / ".pydantic-deep" / "sessions"
    for prompt, answer in (
        ("hello", "You said: hello"),
        ("read /notes.txt", "The pool size is 10."),
        ("next?", "said: next?"),
    ):
        terminal.send(prompt)
        terminal.wait_for(answer)
    terminal.send("/context")
    screen = terminal.wait_for("Compactions 0 in this session")
    assert re.search(r"Context  \[[█░|]+\] \d+%", screen) and "Threshold   90%" in screen

    terminal.send("/compact keep the pool facts")
    screen = terminal.wait_for("Focus: keep the pool facts")
    assert re.search(r"Compacted: ~[\d,]+ → ~[\d,]+ tokens of messages", screen)
    terminal.send("/search pool size")
    terminal.wait_for("Matches for 'pool size'")
    terminal.send("/checkpoint mark")
    checkpoint = re.search(r"Checkpoint (\w+) \(mark\)", terminal.wait_for("(mark) at message"))
    assert checkpoint

    terminal.send("slow")
    terminal.wait_for("word3")
    terminal.key("C-c")  # cancels the turn, not the program
    terminal.wait_for("turn cancelled; your message is kept")
    assert "slow" in _prompts(sessions / original.group(1) / "messages.json")

    terminal.send(f"/rewind {checkpoint.group(1)}")
    rewound = re.search(r"in the new session (\w+)", terminal.wait_for("Rewound to checkpoint"))
    terminal.send("/fork")
    forked = re.search(r"Forked (\w+) → (\w+)", terminal.wait_for("Forked"))
    terminal.send("/quit")
    terminal.wait_for("EXIT-STATUS=0")
    assert rewound and forked and forked.group(1) == rewound.group(1)

    records = JsonHistoryStore.reader(sessions / original.group(1) / "messages.json").load_all_sync()
    [summary] = [m for m in records if is_summary_message(m)]
    assert (summary_info(summary) or {})["focus"] == "keep the pool facts"
    manager = SessionManager(tmp_path / ".pydantic-deep")
    assert {original.group(1), rewound.group(1), forked.group(2)} <= {s.id for s in manager.list()}
    assert "slow" not in _prompts(sessions / rewound.group(1) / "messages.json")  # the checkpoint was before it


def test_resume_after_exit_in_a_terminal(terminal: Terminal, tmp_path: Path) -> None:
    first = run_process(["chat", "--model", "test"], tmp_path, stdin="remember the pool size is 10\nhello\n")
    assert first.status == 0, first.err
    session_id = re.search(r"Resume: pydantic-deep chat --resume (\w+)", first.out)
    assert session_id
    terminal.start("chat", "--resume", session_id.group(1), "--model", "test")
    terminal.wait_for(f"session {session_id.group(1)} (resumed, 6 messages in the working context)")
    terminal.send("/memory")
    terminal.wait_for("MEMORY.md:\nthe pool size is 10")
    terminal.send("again")
    terminal.wait_for("You said: again")
    terminal.key("C-d")  # leaves, like /quit
    terminal.wait_for("EXIT-STATUS=0")
    assert _prompts(tmp_path / ".pydantic-deep" / "sessions" / session_id.group(1) / "messages.json")[-1] == "again"


def test_no_api_key_in_a_terminal(terminal: Terminal, tmp_path: Path) -> None:
    terminal.start("chat", "--model", "openai:gpt-4.1")
    screen = terminal.wait_for("EXIT-STATUS=2")
    assert "pydantic-deep: no API key for openai:gpt-4.1: set OPENAI_API_KEY" in screen
    assert "Traceback" not in screen and not (tmp_path / ".pydantic-deep").exists()
