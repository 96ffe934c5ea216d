"""`pydantic-deep export ID --format json` writes only JSON on standard output, whatever the session holds: notes
go to standard error, so `export ... > history.json` is a valid file (and a model genai-prices does not know gives
none: the session is found through its catalogue, which prices nothing)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import anyio
import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from pydantic_deep import SessionManager
from pydantic_deep.storage import open_storage
from summarization_pydantic_ai import JsonHistoryStore, ensure_message_id, get_message_id

from .conftest import run_cli, run_process

pytestmark = pytest.mark.usefixtures("no_keys")


def _history() -> tuple[list[ModelMessage], str]:
    """Two exchanges answered by a model genai-prices does not know (a new name each time: it warns once per name
    and process)."""
    model = f"acme-{uuid.uuid4().hex[:8]}"
    messages: list[ModelMessage] = []
    for turn in range(2):
        messages.append(ModelRequest(parts=[UserPromptPart(f"question {turn}")]))
        usage = RequestUsage(input_tokens=120 + turn, output_tokens=30)
        messages.append(ModelResponse(parts=[TextPart(f"answer {turn}")], model_name=model, usage=usage))
    for message in messages:
        ensure_message_id(message)
    return messages, model


def _file_session(session_dir: Path) -> tuple[str, list[ModelMessage], str]:
    messages, model = _history()
    info = SessionManager(base_dir=session_dir).create()
    anyio.run(JsonHistoryStore(info.messages_path).append, messages)
    return info.id, messages, model


def test_export_json_piped_into_json_loads_for_a_model_genai_prices_does_not_know(tmp_path: Path) -> None:
    session_id, messages, model = _file_session(tmp_path / "state")
    done = run_process(["export", session_id, "--format", "json", "--session-dir", "state"], cwd=tmp_path)
    assert done.status == 0, done.err
    exported = json.loads(done.out)  # the whole of standard output: nothing before or after the document
    loaded = ModelMessagesTypeAdapter.validate_python(exported)
    assert list(map(get_message_id, loaded)) == list(map(get_message_id, messages))
    # Finding the session reads its catalogue (priced when recorded): no note about the unknown model at all.
    assert model not in done.err and "genai-prices" not in done.out


def test_export_json_to_a_file_and_markdown_keep_notes_off_standard_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, messages, model = _file_session(tmp_path / "state")
    target = tmp_path / "history.json"
    args = ["export", session_id, "--format", "json", "--session-dir", str(tmp_path / "state"), "-o", str(target)]
    written = run_cli(args, capsys, monkeypatch)
    assert written.status == 0 and written.out == "" and model not in written.err
    loaded = ModelMessagesTypeAdapter.validate_json(target.read_bytes())
    assert list(map(get_message_id, loaded)) == list(map(get_message_id, messages))
    markdown = run_cli(["export", session_id, "--session-dir", str(tmp_path / "state")], capsys, monkeypatch)
    assert markdown.status == 0 and markdown.out.startswith(f"# Session {session_id}\n")
    assert "genai-prices" not in markdown.out


def test_export_json_from_a_database_is_only_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'agents.db'}"
    messages, _ = _history()

    async def record() -> None:
        storage = open_storage(url)
        try:
            await storage.history.session("chat1").append(messages)
        finally:
            await storage.close()

    anyio.run(record)
    done = run_cli(["export", "chat1", "--format", "json", "--store", url], capsys, monkeypatch)
    assert done.status == 0, done.err
    exported = ModelMessagesTypeAdapter.validate_python(json.loads(done.out))
    assert list(map(get_message_id, exported)) == list(map(get_message_id, messages))
