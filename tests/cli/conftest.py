"""Helpers for the command-line tests: the program in-process (fast) or in a real pseudo-terminal (tmux)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pydantic_deep.cli import main
from pydantic_deep.cli._models import API_KEY_VARS

ROOT = Path(__file__).resolve().parents[2]
KEY_VARS = [v for names in API_KEY_VARS.values() for v in names] + ["PYDANTIC_DEEP_MODEL", "PYDANTIC_DEEP_DIR"]


@dataclass
class Result:
    status: int
    out: str
    err: str


def run_cli(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stdin: str = ""
) -> Result:
    """`pydantic-deep ARGS` in this process, with `stdin` as a pipe (the chat reads plain lines from it)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    monkeypatch.delenv("COLUMNS", raising=False)  # the piped width, whatever terminal runs the tests
    capsys.readouterr()
    status = main(args)
    captured = capsys.readouterr()
    return Result(status, captured.out, captured.err)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with one small file for the agent to read (the chat tests run in it)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("The pool size is 10.\nNever share a connection.\n")
    return tmp_path


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No API key and no default model in the environment."""
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)


def cli_env() -> dict[str, str]:
    """The environment of a `pydantic-deep` subprocess: this checkout first on the path, no API keys."""
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYDANTIC_AI_NO_BANNER"] = "1"
    return env


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pydantic_deep.cli", *args]


def run_process(args: list[str], cwd: Path, stdin: str = "", timeout: float = 120) -> Result:
    command = cli_command(*args)
    done = subprocess.run(
        command, cwd=cwd, env=cli_env(), input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    return Result(done.returncode, done.stdout, done.stderr)


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` with its bytes (to check that nothing on disk changed)."""
    if not directory.exists():
        return {}
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


class Terminal:
    """The program in a tmux pane (a real pseudo-terminal): type into it, wait for text on its screen."""

    def __init__(self, cwd: Path, width: int = 160, height: int = 50) -> None:
        self.socket = f"pdcli-{uuid.uuid4().hex[:8]}"
        self.cwd, self.width, self.height = cwd, width, height

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True)
        return done.stdout

    def start(self, *args: str) -> None:
        env = [f"{k}={v}" for k, v in cli_env().items() if k in ("PYTHONPATH", "PYDANTIC_AI_NO_BANNER", "PATH")]
        command = ["env", "-u", "OPENAI_API_KEY", "-u", "ANTHROPIC_API_KEY", *env, *cli_command(*args)]
        shell = " ".join(f"'{c}'" for c in command) + "; echo EXIT-STATUS=$?; sleep 600"
        size = ["-x", str(self.width), "-y", str(self.height)]
        self._tmux("new-session", "-d", "-s", "cli", *size, "-c", str(self.cwd), shell)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-2000", "-t", "cli")

    def wait_for_prompt(self, timeout: float = 60) -> None:
        """Until the chat shows an empty prompt (`› ` on the last line): typed-ahead keys could race its setup."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = [line for line in self.screen().splitlines() if line.strip()]
            if lines and lines[-1].strip() == "›":
                return
            time.sleep(0.2)
        raise AssertionError(f"no prompt within {timeout}s; the screen:\n{self.screen()}")

    def send(self, text: str, enter: bool = True) -> None:
        """Type `text` at the chat's prompt (once the prompt shows)."""
        self.wait_for_prompt()
        self._tmux("send-keys", "-t", "cli", "-l", text)
        if enter:
            self._tmux("send-keys", "-t", "cli", "Enter")

    def key(self, name: str) -> None:
        self._tmux("send-keys", "-t", "cli", name)

    def wait_for(self, text: str, timeout: float = 60, count: int = 1) -> str:
        """The screen once `text` shows on it `count` times; fails with the screen after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} (x{count}) did not show within {timeout}s; the screen:\n{screen}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the pseudo-terminal tests drive the program through it")
    term = Terminal(tmp_path)
    try:
        yield term
    finally:
        term.close()
