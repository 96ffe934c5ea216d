"""The CLI's cost surfaces: /cost, the cost line of /context, the sessions' cost column, chat --max-cost."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic_ai.models.function import FunctionModel

from pydantic_deep.cli import _models, _scripted
from summarization_pydantic_ai import JsonHistoryStore, session_costs

from .conftest import run_cli

pytestmark = pytest.mark.usefixtures("no_keys")

TURNS = "hello\nread /notes.txt\nwhat next?\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("The pool size is 10.\nNever share a connection.\n")
    return tmp_path


@pytest.fixture
def priced(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--model test` answers as a model genai-prices knows (gpt-4o), so the chat has a real cost."""

    def gpt_4o() -> FunctionModel:
        return _scripted.scripted_model(_scripted._plan, "gpt-4o", _scripted._delay)  # pyright: ignore[reportPrivateUsage]

    monkeypatch.setattr(_models, "offline_model", gpt_4o)


def _messages_path(root: Path) -> Path:
    [folder] = (root / ".pydantic-deep" / "sessions").iterdir()
    return folder / "messages.json"


@pytest.mark.usefixtures("priced")
def test_cost_and_context_show_what_the_session_file_records(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_cli(["chat", "--model", "test"], capsys, monkeypatch, stdin=TURNS + "/cost\n/context\n/quit\n")
    assert result.status == 0, result.err
    totals = session_costs(JsonHistoryStore.reader(_messages_path(project)).load_all_sync())
    assert totals.total.cost_usd is not None and totals.agent.requests == 4  # hello, read (2 requests), what next
    cost = result.out.split("› /cost", 1)[1].split("› /context", 1)[0]
    money = f"${totals.total.cost_usd.quantize(__import__('decimal').Decimal('0.0001'))}"
    assert f"Session     {money} this session (4 requests, {totals.total.total_tokens:,} tokens)" in cost
    assert re.search(r"Agent\s+\$[\d.]+: 4 requests, [\d,]+ in, [\d,]+ out", cost)
    assert re.search(r"Last turn\s+\$[\d.]+ \(1 requests\)", cost)
    cache = totals.cache
    assert cache.requests == 4 and cache.reported_requests == 0  # a scripted model: the simulator's estimate
    share = f"{cache.cache_read_share:.0%}"
    assert f"Cache       {share} of input read from the prompt cache ({cache.tokens.cache_read_tokens:,} read" in cost
    assert "4 of 4 requests estimated" in cost
    context = result.out.split("› /context", 1)[1]
    assert f"Cost        {money} this session" in context

    listing = run_cli(["sessions"], capsys, monkeypatch)
    assert "cost" in listing.out and money in listing.out


@pytest.mark.usefixtures("priced")
def test_max_cost_stops_the_chat_before_the_request_that_would_pass_it(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "hello\n/cost\n/quit\n"
    result = run_cli(["chat", "--model", "test", "--max-cost", "0.00001"], capsys, monkeypatch, stdin=script)
    assert result.status == 1, result.err  # a turn failed
    assert "--max-cost $0.000010 reached ($0.00 spent): the request was not sent" in result.out
    assert "Budget      $0.00 of $0.000010 (--max-cost)" in result.out.split("› /cost", 1)[1]
    records = JsonHistoryStore.reader(_messages_path(project)).load_all_sync()
    assert session_costs(records).total.requests == 0
    assert [m.kind for m in records] == ["request"]  # the user's message is kept, nothing was sent


def test_an_unpriced_model_shows_unknown_cost_not_zero(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_cli(["chat", "--model", "test"], capsys, monkeypatch, stdin="hello\n/cost\n/quit\n")
    assert result.status == 0, result.err
    cost = result.out.split("› /cost", 1)[1]
    assert "Session     unknown this session (1 requests" in cost
    assert "Unpriced    test" in cost
    assert "$0.00" not in cost


@pytest.mark.parametrize("value", ["0", "-1", "lots", "nan"])
def test_a_bad_max_cost_is_a_usage_error(
    value: str, project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_cli(["chat", "--model", "test", "--max-cost", value], capsys, monkeypatch)
    assert result.status == 2
    assert "--max-cost" in result.err
