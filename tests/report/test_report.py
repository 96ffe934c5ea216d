"""The session report: built from what the history store holds, one self-contained page, small."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from pydantic_deep.eviction import EVICTION_METADATA_KEY as HARNESS_EVICTION_KEY
from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    JsonHistoryStore,
    UsageUpdated,
    count_tokens_approximately,
    ensure_message_id,
)
from summarization_pydantic_ai.report import (
    EVICTION_METADATA_KEY,
    REQUEST_METADATA_KEY,
    build_timeline,
    write_session_report,
    write_session_report_async,
)
from tests.cli.conftest import run_cli

from .scripted import SESSION_ID, run_scripted_session

MEGABYTE = 1_000_000


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 200-request session (3 compactions, 5 evictions): its messages.json."""
    return asyncio.run(run_scripted_session(tmp_path_factory.mktemp("session")))


def _records(path: Path) -> list[ModelMessage]:
    return JsonHistoryStore.reader(path).load_all_sync()


def test_the_timeline_of_a_scripted_session(scripted: Path) -> None:
    timeline = build_timeline(_records(scripted))
    assert len(timeline.requests) == 200
    assert all(p.measured and p.max_tokens == 60_000 and p.threshold_tokens == 54_000 for p in timeline.requests)
    assert [c.kind for c in timeline.compactions] == ["summary"] * 3
    for compaction in timeline.compactions:
        point = timeline.requests[compaction.request - 1]
        assert compaction.tokens_before is not None and compaction.tokens_before >= 54_000
        assert compaction.tokens_after == point.tokens and point.tokens < 10_000, "the chart's point is the after"
        assert {p["kind"] for p in compaction.preserved} >= {"latest_request"}
        assert compaction.covered_messages > 100 and "run_step" in compaction.text
    assert [e.request for e in timeline.evictions] == [21, 61, 101, 141, 181]
    folder = scripted.parent / "large_tool_results"
    for eviction in timeline.evictions:
        assert eviction.tool_name == "run_step" and eviction.tokens > 5_000
        assert (folder / Path(eviction.path).name).is_file(), "the marker names the file the output went to"
    largest = sorted(timeline.tool_outputs, key=lambda o: o.tokens, reverse=True)[:5]
    assert {o.tool_call_id for o in largest} == {e.tool_call_id for e in timeline.evictions}
    assert timeline.overflows == []


def test_the_page_is_self_contained_and_small(scripted: Path, tmp_path: Path) -> None:
    out = write_session_report(scripted, tmp_path / "r.html")
    html = out.read_text(encoding="utf-8")
    assert out.stat().st_size < 200_000
    assert html.count('class="marker compaction"') == 3 and html.count('class="marker eviction"') == 5
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(|\bsrc=", html, re.IGNORECASE)
    assert not re.search(r"(?:href|xlink:href)=\"(?!#)", html), "links only within the page"
    assert "default-src 'none'" in html
    assert f"Session {SESSION_ID}" in html and "/large_tool_results/step-20_" in html


def test_the_cost_is_the_cost_modules_and_adds_up_request_by_request(scripted: Path) -> None:
    from summarization_pydantic_ai.cost import format_cost, session_costs
    from summarization_pydantic_ai.report._cost import cost_view

    records = _records(scripted)
    totals = session_costs(records)
    assert totals.total.cost_usd is not None and totals.total.cost_usd > 0 and not totals.unpriced_models
    view = cost_view(records)
    assert view.totals == totals
    assert len(view.cumulative) == 200 and view.cumulative[-1] == pytest.approx(float(totals.total.cost_usd))
    known = [c for c in view.cumulative if c is not None]
    assert len(known) == 200 and known == sorted(known) and known[0] > 0
    html = write_session_report(scripted, scripted.parent / "cost.html").read_text(encoding="utf-8")
    assert 'id="cost-chart"' in html and f"Total {format_cost(totals)} for 200 model requests" in html


def test_an_unpriced_model_is_unknown_cost_never_zero() -> None:
    from summarization_pydantic_ai.report import render_session_report

    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(
            parts=[TextPart("hello")],
            usage=RequestUsage(input_tokens=900, output_tokens=5),
            model_name="no-such-model-xyz",
        ),
    ]
    html = render_session_report(messages, title="t")
    assert "<b>unknown</b>total cost" in html and "Total unknown for 1 model requests" in html
    assert "price unknown for no-such-model-xyz" in html and "$0" not in html, "never reported as 0"
    assert 'id="cost-chart"' not in html, "no line: nothing is priced"


def test_each_response_carries_the_measure_of_its_request(tmp_path: Path) -> None:
    usage: list[UsageUpdated] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) < 7:
            return ModelResponse(parts=[ToolCallPart("look", {"n": len(messages)})])
        return ModelResponse(parts=[TextPart("done")])

    middleware = ContextManagerMiddleware(
        messages_path=tmp_path / "messages.json",
        max_tokens=50_000,
        reserve_output_tokens=1_000,
        event_callback=lambda e: usage.append(e) if isinstance(e, UsageUpdated) else None,
    )
    agent = Agent(FunctionModel(model), capabilities=[middleware])
    agent.tool_plain(lambda n: "x " * 300 * n, name="look")
    asyncio.run(agent.run("go"))
    responses = [m for m in _records(tmp_path / "messages.json") if isinstance(m, ModelResponse)]
    stamps = [(m.metadata or {})[REQUEST_METADATA_KEY] for m in responses]
    assert [s["tokens"] for s in stamps] == [e.tokens for e in usage]
    assert {s["max_tokens"] for s in stamps} == {49_000} and {s["threshold_tokens"] for s in stamps} == {44_100}


class _RejectsOnce:
    """A provider that rejects its third request as too long once, then accepts everything."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        if self.calls == 3:
            raise ModelHTTPError.for_category(
                ModelContextWindowExceededError,
                status_code=400,
                model_name="small",
                body={"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}},
            )
        if self.calls < 5:
            return ModelResponse(parts=[ToolCallPart("read", {"n": self.calls}, tool_call_id=f"r{self.calls}")])
        return ModelResponse(parts=[TextPart("done")])


def test_an_overflow_recovery_is_marked_at_its_request(tmp_path: Path) -> None:
    path = tmp_path / "messages.json"
    agent = Agent(FunctionModel(_RejectsOnce()), capabilities=[ContextManagerMiddleware(messages_path=path)])
    agent.tool_plain(lambda n: "\n".join(f"line {i} of file {n}" for i in range(2_000)), name="read")
    asyncio.run(agent.run("read the files"))
    timeline = build_timeline(_records(path))
    assert len(timeline.requests) == 4, "the rejected attempt is no request of its own"
    [overflow] = timeline.overflows
    assert overflow.request == 3
    retry = overflow.retries[0]
    assert retry["tokens_after"] < retry["tokens_before"] and retry["steps"]
    assert timeline.requests[2].tokens == overflow.retries[-1]["tokens_after"], "the chart plots what was sent"
    html = write_session_report(path).read_text(encoding="utf-8")
    assert html.count('class="marker overflow"') == 1 and "Overflow recovery 1 at request 3" in html


async def test_a_store_is_a_source_too_and_the_async_form_is_for_event_loops(scripted: Path, tmp_path: Path) -> None:
    store = JsonHistoryStore.reader(scripted)
    out = await write_session_report_async(store, tmp_path)
    assert out == tmp_path / "report.html" and out.read_text(encoding="utf-8").count('"marker compaction"') == 3
    with pytest.raises(RuntimeError, match="await write_session_report_async"):
        write_session_report(store, tmp_path)
    assert len(_records(scripted)) == len(store), "reading changed nothing"


def test_bad_sources_and_targets_are_refused_clearly(tmp_path: Path) -> None:
    from summarization_pydantic_ai import HistoryStoreError

    with pytest.raises(HistoryStoreError, match="no history file"):
        write_session_report(tmp_path / "missing.json")
    path = tmp_path / "messages.json"
    message = ModelRequest(parts=[UserPromptPart("hi")])
    ensure_message_id(message)
    store = JsonHistoryStore(path)
    store.append_sync([message])
    store.close()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        write_session_report(path, tmp_path / "nowhere" / "r.html")
    assert not list(tmp_path.glob("**/.*.tmp"))


def test_a_history_written_without_the_middleware_falls_back_to_provider_usage(tmp_path: Path) -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("hello")], usage=RequestUsage(input_tokens=1_234, output_tokens=5)),
        ModelRequest(parts=[UserPromptPart("and?")]),
        ModelResponse(parts=[TextPart("that's all")]),
    ]
    timeline = build_timeline(messages)
    assert [(p.tokens, p.measured, p.max_tokens) for p in timeline.requests] == [
        (1_234, False, None),
        (None, False, None),
    ]
    assert count_tokens_approximately(messages) > 0


def test_the_eviction_key_is_the_harness_key() -> None:
    assert EVICTION_METADATA_KEY == HARNESS_EVICTION_KEY


def test_the_command_line_writes_the_report(
    scripted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = scripted.parents[2]
    out = tmp_path / "session.html"
    result = run_cli(["report", SESSION_ID, "--out", str(out), "--session-dir", str(base)], capsys, monkeypatch)
    assert result.status == 0 and str(out) in result.out
    assert out.read_text(encoding="utf-8").count('"marker eviction"') == 5
    missing = run_cli(["report", "nope", "--session-dir", str(base)], capsys, monkeypatch)
    assert missing.status == 1 and "no session 'nope'" in missing.err


def _worst_case(requests: int) -> list[ModelMessage]:
    """Every request compacts (a 20,000-character summary), evicts, recovers from an overflow and returns a large
    tool output: far more of everything than a real session has."""
    messages: list[ModelMessage] = []
    for k in range(1, requests + 1):
        summary = {
            "covered_messages": 40,
            "summarizer": "llm",
            "tokens_before": 180_000,
            "tokens_after": 20_000,
            "preserved": [
                {"kind": "latest_request", "messages": 1, "tokens": 300},
                {"kind": "todo", "messages": 2, "tokens": 500},
            ],
        }
        from pydantic_ai.messages import CompactionPart

        from summarization_pydantic_ai import SUMMARY_METADATA_KEY

        messages.append(
            ModelRequest(
                parts=[CompactionPart(content="## Goal\n" + "x" * 20_000, metadata={SUMMARY_METADATA_KEY: summary})]
            )
        )
        evicted = {"path": f"/large_tool_results/tool-{k}_0123456789abcdef", "tokens": 50_000, "state": "archived"}
        messages.append(
            ModelRequest(
                parts=[
                    ToolReturnPart(
                        "grep", "preview " * 500, tool_call_id=f"e{k}", metadata={EVICTION_METADATA_KEY: evicted}
                    ),
                    ToolReturnPart("read_file", "y" * 60_000, tool_call_id=f"r{k}"),
                ]
            )
        )
        stamp = {
            "tokens": 150_000 + k,
            "max_tokens": 200_000,
            "threshold_tokens": 180_000,
            "overflow": [
                {"steps": ["clear_tool_results", "summarize"], "tokens_before": 210_000, "tokens_after": 150_000}
            ],
        }
        call = ToolCallPart("grep", {"pattern": "x"}, tool_call_id=f"c{k}")
        messages.append(ModelResponse(parts=[call], metadata={REQUEST_METADATA_KEY: stamp}))
    return messages


def test_a_thousand_request_worst_case_stays_under_a_megabyte(tmp_path: Path) -> None:
    from summarization_pydantic_ai.report import render_session_report

    html = render_session_report(_worst_case(1_000), title="worst case")
    size = len(html.encode("utf-8"))
    assert size < MEGABYTE, f"{size:,} bytes"
    assert html.count('"marker compaction"') == 1_000 and html.count('"marker overflow"') == 1_000
