"""The quality probes: sessions with planted facts, scoring, reports, the command line, and the acceptance gate
(the deterministic summarizer keeps the whole artifact trail: files changed, the todo list, the last request)."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    DeterministicSummarizer,
    JsonHistoryStore,
    SlidingWindowProcessor,
    SummarizationProcessor,
    SummaryRequest,
    render_messages,
    validate_history,
)
from summarization_pydantic_ai.evals import (
    ARTIFACT_CATEGORIES,
    Probe,
    ProbeReport,
    arun_probes,
    build_session,
    derive_probes,
    load_messages,
    run_probes,
    todo_patterns,
)
from summarization_pydantic_ai.evals._cli import main


def summarization(keep: int = 20) -> SummarizationProcessor:
    return SummarizationProcessor(None, trigger=("messages", keep + 1), keep=keep)


def middleware(tmp_path: Path, keep: int = 20, **options: Any) -> ContextManagerMiddleware:
    store = JsonHistoryStore(tmp_path / "messages.json")
    return ContextManagerMiddleware(
        max_tokens=200_000, keep=("messages", keep), summarization_model=None, history_store=store, **options
    )


# -- the sessions ----------------------------------------------------------------------------------------------


def test_a_session_is_deterministic_valid_and_has_every_kind_of_fact() -> None:
    first, again, other = build_session(200, seed=3), build_session(200, seed=3), build_session(200, seed=4)
    assert render_messages(first.messages) == render_messages(again.messages)
    assert first.probes == again.probes
    assert render_messages(first.messages) != render_messages(other.messages)
    assert len(first.messages) >= 200
    assert validate_history(first.messages) == []
    categories = {p.category for p in first.probes}
    assert categories == {"file_paths", "todo_state", "last_request", "decisions", "errors"}


def test_a_session_rejects_a_size_too_small_for_its_facts() -> None:
    with pytest.raises(ValueError, match="at least 60"):
        build_session(10)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(60, 250), seed=st.integers(0, 10_000))
async def test_every_probe_is_answerable_before_compaction_and_the_summary_keeps_the_artifact_trail(
    size: int, seed: int
) -> None:
    """The probes are sound (the uncompacted session answers all of them) and, whatever the session, the
    deterministic summary keeps every file changed, the latest todo list and the last request."""
    session = build_session(size, seed)
    untouched = await arun_probes(lambda messages: messages, session)
    assert untouched.score == 1.0
    report = await arun_probes(summarization(), session)
    assert report.score_of(ARTIFACT_CATEGORIES) == 1.0, report.table()
    assert report.messages_after < report.messages_before
    assert report.problems == []


# -- the acceptance gate ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [200, 1_000])
async def test_the_deterministic_summarizer_keeps_the_whole_artifact_trail(size: int, tmp_path: Path) -> None:
    session = build_session(size, seed=0)
    mw = middleware(tmp_path)
    for report in [await arun_probes(summarization(), session), await arun_probes(mw.compact, session)]:
        for category in ARTIFACT_CATEGORIES:
            scores = {c.category: c for c in report.categories()}
            assert scores[category].probes > 0, f"no {category} probes: the gate would pass vacuously"
            assert scores[category].working == scores[category].probes, report.table()
        assert report.problems == []
        assert report.tokens_after < report.tokens_before / 3


async def test_rolling_summaries_keep_the_artifact_trail_when_replayed() -> None:
    """Replayed request by request, the history is summarized many times: each summary carries the files and
    the todo list of the one it replaces."""
    processor = SummarizationProcessor(None, trigger=("messages", 100), keep=20)
    report = await arun_probes(processor, build_session(1_000, seed=1), replay=True)
    assert report.messages_after < 130  # it was compacted again and again, not once
    assert report.score_of(ARTIFACT_CATEGORIES) == 1.0, report.table()


async def test_the_sliding_window_scores_lower_on_old_facts_than_the_summarizer() -> None:
    session = build_session(400, seed=0)
    window = SlidingWindowProcessor(trigger=("messages", 21), keep=20)
    sliding, summarized = await arun_probes(window, session), await arun_probes(summarization(), session)
    sliding_scores, summary_scores = sliding.category_scores(), summarized.category_scores()
    for category in ("file_paths", "errors"):
        assert sliding_scores[category] < summary_scores[category], (sliding.table(), summarized.table())
    # The current todo list is in the working set that every compaction path keeps, the window included.
    assert sliding_scores["todo_state"] == summary_scores["todo_state"] == 1.0
    assert sliding.score < summarized.score
    assert sliding.failing and all(not r.answerable for r in sliding.failing)


async def test_a_paraphrased_last_request_fails_its_probe() -> None:
    session = build_session(100, seed=2)

    def paraphrase(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [ModelRequest(parts=[UserPromptPart("The user wants the dashboard fixed.")])]

    report = await arun_probes(paraphrase, session)
    assert report.category_scores()["last_request"] == 0.0
    assert report.score < 0.1


# -- rehydration -----------------------------------------------------------------------------------------------


async def test_rehydration_from_the_history_store_answers_what_the_summary_left_out(tmp_path: Path) -> None:
    session = build_session(300, seed=5)
    mw = middleware(tmp_path)
    working_only = await arun_probes(mw.compact, session)
    mw = middleware(tmp_path / "second")
    rehydrated = await arun_probes(mw.compact, session, rehydrate=mw.store)
    assert working_only.score < 1.0
    assert rehydrated.working_score == working_only.score
    assert rehydrated.score == 1.0
    assert any(r.found_in == "rehydration" for r in rehydrated.results)


async def test_rehydration_can_be_a_function(tmp_path: Path) -> None:
    session = build_session(100, seed=6)
    seen: list[int] = []

    async def read_back(working: list[ModelMessage]) -> list[ModelMessage]:
        seen.append(len(working))
        return session.messages[:40]

    window = SlidingWindowProcessor(trigger=("messages", 21), keep=20)  # forgets: rehydration has work to do
    report = await arun_probes(window, session, rehydrate=read_back)
    assert seen == [report.messages_after]
    rehydrated = [r.probe for r in report.results if r.found_in == "rehydration"]
    assert rehydrated
    assert all(p.answered_by(render_messages(session.messages[:40])) for p in rehydrated)


# -- probes and scoring ----------------------------------------------------------------------------------------


def test_a_probe_matches_ignoring_case_and_whitespace() -> None:
    probe = Probe("decisions", "Which store?", "SQLite  in\nWAL mode")
    assert probe.answered_by("We picked sqlite in\n  wal MODE for it")
    assert not probe.answered_by("we picked sqlite")


def test_a_probe_refuses_an_empty_answer_or_a_broken_pattern() -> None:
    with pytest.raises(ValueError, match="expected answer"):
        Probe("x", "q?", "  ")
    with pytest.raises(ValueError, match="invalid pattern"):
        Probe("x", "q?", "a", patterns=("(unclosed",))


@pytest.mark.parametrize(
    "text",
    [
        '{"todos":[{"content":"write the parser","status":"completed"}]}',
        '{"status": "completed", "content": "Write the parser"}',
        "1. [x] write the parser\n2. [ ] ship it",
        "- [x] Write the parser (completed)\n- [~] ship it (in_progress)",
        "- write the parser (done)",
        "Write the parser: completed",
    ],
)
def test_todo_patterns_read_the_usual_renderings(text: str) -> None:
    probe = Probe(
        "todo_state", "status?", "write the parser: completed", todo_patterns("write the parser", "completed")
    )
    assert probe.answered_by(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"content":"write the parser","status":"pending"}',
        "1. [ ] write the parser",
        "write the parser (in progress)",
        "[x] write the parser tests",
    ],
)
def test_todo_patterns_do_not_accept_another_status_or_item(text: str) -> None:
    probe = Probe(
        "todo_state", "status?", "write the parser: completed", todo_patterns("write the parser", "completed")
    )
    assert not probe.answered_by(text)


def _own_session() -> list[ModelMessage]:
    def call(name: str, args: dict[str, Any], call_id: str) -> list[ModelMessage]:
        return [ModelResponse([ToolCallPart(name, args, call_id)]), ModelRequest([ToolReturnPart(name, "ok", call_id)])]

    old_todos = [{"content": "plan", "status": "in_progress"}, {"content": "build", "status": "pending"}]
    new_todos = [{"content": "plan", "status": "completed"}, {"content": "build", "status": "in_progress"}]
    return [
        ModelRequest([UserPromptPart("start")]),
        *call("write_todos", {"todos": old_todos}, "c1"),
        *call("read_file", {"path": "docs/read_only.md"}, "c2"),
        *call("write_file", {"path": "app/main.py", "content": "x"}, "c3"),
        *call("edit_file", {"file_path": "app/util.py", "old_string": "a", "new_string": "b"}, "c4"),
        *call("write_todos", json.dumps({"todos": new_todos}), "c5"),
        ModelResponse([TextPart("done")]),
        ModelRequest([UserPromptPart(["Now ship it.", ImageUrl("https://example.com/shot.png")])]),
    ]


def test_derive_probes_asks_for_the_artifact_trail_of_any_session() -> None:
    probes = derive_probes(_own_session())
    by_category: dict[str, list[str]] = {}
    for probe in probes:
        by_category.setdefault(probe.category, []).append(probe.expected)
    assert by_category == {
        "file_paths": ["app/main.py", "app/util.py"],  # changed, not merely read
        "todo_state": ["plan: completed", "build: in_progress"],  # the latest list only
        "last_request": ["Now ship it.", "[image: https://example.com/shot.png]"],
    }


async def test_your_own_session_and_probes(tmp_path: Path) -> None:
    messages = _own_session()
    mine = [*derive_probes(messages), Probe("reads", "Which doc was read?", "docs/read_only.md")]
    report = await arun_probes(lambda m: m[-1:], messages, probes=mine, name="keep last")
    assert report.strategy == "keep last"
    assert [r.probe.category for r in report.failing] == ["file_paths"] * 2 + ["todo_state"] * 2 + ["reads"]
    assert report.category_scores()["last_request"] == 1.0


# -- the report ------------------------------------------------------------------------------------------------


async def test_the_report_is_a_readable_table_and_json(tmp_path: Path) -> None:
    report = await arun_probes(SlidingWindowProcessor(trigger=("messages", 21), keep=20), messages=200)
    text = str(report)
    assert text.startswith("Quality probes: SlidingWindowProcessor on seed 0")
    for category in ("file_paths", "todo_state", "last_request", "decisions", "errors", "overall"):
        assert f"\n{category} " in text
    assert f"failing probes ({len(report.failing)}):" in text
    data = json.loads(json.dumps(report.to_dict()))
    assert data["score"] == report.score
    assert len(data["results"]) == len(report.results)


async def test_bad_compaction_paths_are_refused() -> None:
    with pytest.raises(TypeError, match="callable"):
        await arun_probes("not a function", messages=60)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a list of messages"):
        await arun_probes(lambda messages: None, messages=60)  # type: ignore[arg-type,return-value]


async def test_the_compaction_receives_a_copy_of_the_session() -> None:
    session = build_session(60, seed=0)
    before = render_messages(session.messages)

    def vandal(messages: list[ModelMessage]) -> list[ModelMessage]:
        for message in messages:
            message.parts = []
        return messages

    await arun_probes(vandal, session)
    assert render_messages(session.messages) == before


# -- loading a recorded session --------------------------------------------------------------------------------


async def test_load_messages_reads_a_history_file_without_its_summaries(tmp_path: Path) -> None:
    session = build_session(100, seed=7)
    mw = middleware(tmp_path)
    await mw.compact(session.messages)
    loaded = load_messages(tmp_path / "messages.json")
    assert render_messages(loaded) == render_messages(session.messages)
    plain = tmp_path / "plain.json"
    plain.write_bytes(ModelMessagesTypeAdapter.dump_json(session.messages))
    assert render_messages(load_messages(plain)) == render_messages(session.messages)


# -- the deterministic summarizer keeps the trail ----------------------------------------------------------------


def test_the_deterministic_summary_lists_every_changed_file_and_the_latest_todo_list() -> None:
    session = build_session(1_000, seed=8)
    summary = DeterministicSummarizer().summarize_sync(SummaryRequest(session.messages[:-1]))
    changed = [p.expected for p in derive_probes(session.messages) if p.category == "file_paths"]
    assert len(changed) > 40  # more than fit with their tools and message ids: the oldest are listed by path
    listed = next(line for line in summary.splitlines() if line.startswith("- also changed: "))
    assert all(f"`{path}` (changed by" in summary or f"`{path}`" in listed for path in changed)
    assert "Todo list (msg s8-m" in summary
    assert len(summary) <= 12_000


def test_a_rolling_deterministic_summary_carries_the_trail_of_the_one_it_replaces() -> None:
    messages = _own_session()
    first = DeterministicSummarizer().summarize_sync(SummaryRequest(messages[:13]))
    rest = [ModelResponse([TextPart("more work")]), ModelRequest([UserPromptPart("and more")])]
    second = DeterministicSummarizer(max_chars=2_000).summarize_sync(SummaryRequest(rest, previous_summary=first))
    after_earlier = second.split("## Intent", 1)[1]  # the new sections, not the quoted earlier summary
    assert "`app/main.py` (changed by write_file; msg #5)" in after_earlier
    assert "`app/util.py` (changed by edit_file; msg #7)" in after_earlier
    assert "- [x] plan (completed)\n- [~] build (in_progress)" in after_earlier


# -- the command line ------------------------------------------------------------------------------------------


def test_the_command_line_exits_non_zero_below_the_minimum_score(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--messages", "100", "--strategy", "sliding", "--min-score", "0.9"]) == 1
    assert "sliding (no summary" in capsys.readouterr().out
    artifact = ["--category", "file_paths", "--category", "todo_state", "--category", "last_request"]
    assert main(["--messages", "100", "--strategy", "summarization", "--min-score", "1", *artifact]) == 0
    assert "decisions" not in capsys.readouterr().out.split("overall")[0]


def test_the_command_line_probes_your_own_file_with_your_own_probes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "session.json"
    path.write_bytes(ModelMessagesTypeAdapter.dump_json(_own_session()))
    probes = tmp_path / "probes.json"
    probes.write_text(json.dumps([{"category": "reads", "question": "Read?", "expected": "docs/read_only.md"}]))
    code = main(["--path", str(path), "--probes", str(probes), "--strategy", "middleware", "--keep", "2", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["categories"]) == {"file_paths", "todo_state", "last_request", "reads"}
    assert data["categories"]["reads"] == 1.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--min-score", "90"], "fraction between 0 and 1"),
        (["--messages", "5"], "at least 60"),
        (["--path", "does/not/exist.json"], "No such file"),
        (["--strategy", "magic"], "invalid choice"),
    ],
)
def test_the_command_line_explains_bad_arguments(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_python_dash_m_runs_the_probes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m summarization_pydantic_ai.evals` (its `__main__`, run in this process to stay fast)."""
    monkeypatch.setattr(sys, "argv", ["evals", "--messages", "60", "--strategy", "sliding", "--min-score", "1.0"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("summarization_pydantic_ai.evals", run_name="__main__")
    assert exit_info.value.code == 1  # the window forgets the files changed early on
    assert "Quality probes: sliding" in capsys.readouterr().out


def test_run_probes_is_synchronous_outside_an_event_loop() -> None:
    report = run_probes(SlidingWindowProcessor(trigger=("messages", 21), keep=20), messages=200, seed=4)
    assert isinstance(report, ProbeReport)
    assert report.messages_before > report.messages_after


async def test_run_probes_also_works_inside_a_running_loop_and_matches_the_async_form() -> None:
    window = SlidingWindowProcessor(trigger=("messages", 21), keep=20)
    from_sync = run_probes(window, messages=200, seed=4)
    from_async = await arun_probes(SlidingWindowProcessor(trigger=("messages", 21), keep=20), messages=200, seed=4)
    assert from_sync.to_dict() == from_async.to_dict()
