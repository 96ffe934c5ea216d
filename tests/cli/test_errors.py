"""Every failure the user can cause is one clear line on stderr, a non-zero status, and no change on disk."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from pydantic_ai.models.function import FunctionModel

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.cli._app import build_parser
from pydantic_deep.cli._errors import CliError
from pydantic_deep.cli._models import ResolvedModel, probe, resolve_model

from .conftest import run_cli, snapshot


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{err}"
    assert "Traceback" not in err
    return lines[0]


def test_the_parser_reads_every_command() -> None:
    parser = build_parser()
    args = parser.parse_args(["chat", "--model", "test", "--resume", "abc", "--fork", "--workdir", "w"])
    assert (args.command, args.model, args.resume, args.fork, str(args.workdir)) == ("chat", "test", "abc", True, "w")
    args = parser.parse_args(["search", "abc", "pool", "exhausted", "--session-dir", "s"])
    assert (args.id, args.query, str(args.session_dir)) == ("abc", ["pool", "exhausted"], "s")
    args = parser.parse_args(["export", "abc", "--format", "json", "-o", "out.json"])
    assert (args.format, str(args.output)) == ("json", "out.json")
    assert parser.parse_args(["demo", "--dir", "d"]).dir == Path("d")


@pytest.mark.usefixtures("no_keys")
def test_no_api_key_names_the_variable_and_the_model_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli(["chat"], capsys, monkeypatch)  # the default model is openai:gpt-4.1
    line = _one_line(result.err)
    assert result.status != 0
    assert "OPENAI_API_KEY" in line and "--model test" in line
    result = run_cli(["chat", "--model", "anthropic:claude-sonnet-4-5"], capsys, monkeypatch)
    assert result.status != 0 and "ANTHROPIC_API_KEY" in _one_line(result.err)
    assert snapshot(tmp_path) == {}  # no session directory was made


@pytest.mark.usefixtures("no_keys")
@pytest.mark.parametrize("name", ["nonsense", "nosuchprovider:model-x"])
def test_an_unknown_model_is_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli(["chat", "--model", name], capsys, monkeypatch)
    line = _one_line(result.err)
    assert result.status != 0 and name in line and "--model test" in line
    assert snapshot(tmp_path) == {}


def test_an_unreachable_model_fails_before_anything_is_written() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now

    class Unreachable(FunctionModel):
        @property
        def base_url(self) -> str:
            return f"http://127.0.0.1:{port}/v1"

    resolved = ResolvedModel("openai:gpt-4.1", Unreachable(lambda m, i: None), None)  # type: ignore[arg-type,return-value]
    with pytest.raises(CliError, match=r"cannot reach openai:gpt-4\.1 at http://127\.0\.0\.1:\d+/v1") as caught:
        probe(resolved, timeout=2)
    assert "--model test" in str(caught.value) and "\n" not in str(caught.value)


def test_the_test_model_needs_no_key(no_keys: None) -> None:
    resolved = resolve_model("test")
    assert resolved.summarization_model is None and resolved.max_tokens


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["chat", "--model", "test", "--resume", "../evil"], "session id"),
        (["chat", "--model", "test", "--resume", "nosuchsession"], "no session 'nosuchsession'"),
        (["show", "../../etc"], "session id"),
        (["show", "nosuchsession"], "no session 'nosuchsession'"),
        (["search", "nosuchsession", "x"], "no session"),
        (["export", "nosuchsession", "--format", "md"], "no session"),
        (["chat", "--model", "test", "--fork"], "--fork needs --resume"),
        (["chat", "--model", "test", "--workdir", "no/such/dir"], "no such directory"),
        (["export", "abc", "--format", "pdf"], "invalid choice"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments_are_one_line(
    args: list[str],
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli(args, capsys, monkeypatch)
    assert result.status != 0
    assert expected in _one_line(result.err)
    assert snapshot(tmp_path) == {}


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_corrupt_session_is_refused_and_left_as_it_is(
    damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli(["chat", "--model", "test"], capsys, monkeypatch, stdin="hello\nread /x\n").status == 0
    [folder] = (tmp_path / ".pydantic-deep" / "sessions").iterdir()
    path = folder / "messages.json"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3] if damage == "truncate" else data[:200] + b"\x00garbage{" + data[200:])
    before = snapshot(tmp_path)
    for args in (["chat", "--model", "test", "--resume", folder.name], ["show", folder.name]):
        result = run_cli(args, capsys, monkeypatch, stdin="hello again\n")
        line = _one_line(result.err)
        assert result.status != 0 and folder.name in line and "nothing was changed" in line
    assert snapshot(tmp_path) == before


def test_sessions_written_without_the_cli_are_listed_and_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_ai.messages import ModelResponse, TextPart

    monkeypatch.chdir(tmp_path)
    agent = create_deep_agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("hi from the library")])))
    deps = DeepAgentDeps(session_id="libsession")  # .pydantic-deep/sessions/libsession/messages.json
    agent.run_sync("written by create_deep_agent", deps=deps)
    listed = run_cli(["sessions"], capsys, monkeypatch)
    assert listed.status == 0 and "libsession" in listed.out and "written by create_deep_agent" in listed.out
    chat = run_cli(["chat", "--resume", "libsession", "--model", "test"], capsys, monkeypatch, stdin="and now?\n")
    assert chat.status == 0 and "resumed, 2 messages" in chat.out and "You said: and now?" in chat.out
    shown = run_cli(["show", "libsession"], capsys, monkeypatch)
    assert "hi from the library" in shown.out and "and now?" in shown.out


def test_without_the_cli_extra_the_command_says_how_to_get_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rich" else real(name, *a))
    result = run_cli(["sessions"], capsys, monkeypatch)
    assert result.status == 2
    assert _one_line(result.err) == (
        'pydantic-deep: rich not installed; install the cli extra: pip install "summarization-pydantic-ai[cli]"'
    )


def test_the_console_script_is_the_cli_entry_point() -> None:
    import tomllib

    from pydantic_deep import cli

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"pydantic-deep": "pydantic_deep.cli:main"}
    assert callable(cli.main)
    cli_extra = {dep.split(">")[0] for dep in project["optional-dependencies"]["cli"]}
    assert cli_extra == {"rich", "prompt-toolkit"} <= {d.split(">")[0] for d in project["optional-dependencies"]["dev"]}
