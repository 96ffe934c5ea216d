"""`pydantic-deep demo`: offline, no key, through the real stack; it leaves a session the other commands open."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from pydantic_deep import SessionManager
from summarization_pydantic_ai import JsonHistoryStore, get_message_id, is_summary_message, validate_history

from .conftest import Result, run_cli


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    """The demo, run once for this module, in-process, with no API key in the environment."""
    root = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as monkeypatch:
        from .conftest import KEY_VARS

        for name in KEY_VARS:
            monkeypatch.delenv(name, raising=False)
        capture = _Capture()
        monkeypatch.setattr("sys.stdout", capture)
        from pydantic_deep.cli import main

        status = main(["demo", "--dir", str(root)])
    return root, Result(status, capture.getvalue(), "")


class _Capture:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def getvalue(self) -> str:
        return "".join(self.parts)


def test_the_demo_shows_what_happens_and_passes_its_checks(demo: tuple[Path, Result]) -> None:
    root, result = demo
    assert result.status == 0, result.out
    out = result.out
    assert "⤓ evicted the run_tests output" in out and "⟳ compacted:" in out and "✎ memory:" in out
    assert re.search(r"context \[[█░|]+\] \d+%", out)  # the live usage bar
    assert "[FAIL]" not in out and out.count("[ok]") == 5
    assert "E   inventory.pool.PoolExhausted: connection pool exhausted" in out.split("after the session", 1)[1]
    [info] = SessionManager(root / ".pydantic-deep").list()
    assert f"pydantic-deep show {info.id}" in out and f"chat --resume {info.id} --model test" in out
    assert info.compactions >= 1 and info.message_count >= 30
    records = JsonHistoryStore.reader(info.messages_path).load_all_sync()
    assert any(is_summary_message(m) for m in records)
    working = JsonHistoryStore.reader(info.messages_path).load_sync()
    assert validate_history(working, for_request=False) == []
    assert "release(conn)" in (root / "project" / "src" / "inventory" / "checkout.py").read_text()  # the fix landed


def test_the_demo_session_opens_in_every_command(
    demo: tuple[Path, Result], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = demo
    monkeypatch.chdir(root)  # as the demo says: cd there, then the commands
    [info] = SessionManager().list()
    listed = run_cli(["sessions"], capsys, monkeypatch)
    assert listed.status == 0 and info.id in listed.out
    shown = run_cli(["show", info.id], capsys, monkeypatch)
    assert shown.status == 0 and re.search(r"#\d+ summary of \d+ messages", shown.out)
    found = run_cli(["search", info.id, "pool exhausted"], capsys, monkeypatch)
    assert found.status == 0 and "connection pool exhausted" in found.out
    exported = run_cli(["export", info.id, "--format", "md"], capsys, monkeypatch)
    assert exported.status == 0 and exported.out.startswith(f"# Session {info.id}")
    as_json = run_cli(["export", info.id, "--format", "json"], capsys, monkeypatch)
    messages = ModelMessagesTypeAdapter.validate_json(as_json.out)
    recorded = JsonHistoryStore.reader(info.messages_path).load_all_sync()
    assert list(map(get_message_id, messages)) == list(map(get_message_id, recorded))
    chat = run_cli(
        ["chat", "--resume", info.id, "--model", "test", "--workdir", "project"],
        capsys,
        monkeypatch,
        stdin="read /src/inventory/checkout.py\n/context\n",
    )
    assert chat.status == 0, chat.err
    assert "resumed" in chat.out and "Compactions 1 in this session" in chat.out
    assert "Checkout: reserve stock" in chat.out  # the agent reads the project the demo left


def test_the_demo_refuses_a_directory_it_did_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "mine.txt").write_text("keep me")
    result = run_cli(["demo", "--dir", str(tmp_path)], capsys, monkeypatch)
    assert result.status != 0 and "was not written by the demo" in result.err
    assert [p.name for p in (tmp_path / "project").iterdir()] == ["mine.txt"]
