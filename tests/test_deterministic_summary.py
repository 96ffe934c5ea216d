"""Issue 23, scope 2: the deterministic summary keeps the substance (decisions, errors with their fixes, files
touched with their last action, todos, the latest request, open questions), within its budget, newest first."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from summarization_pydantic_ai import MESSAGE_ID_KEY, DeterministicSummarizer, SummaryRequest
from summarization_pydantic_ai.evals import build_family_session
from summarization_pydantic_ai.summarize._sentences import failure_headline, is_choice, looks_failed


def tagged(messages: list[ModelMessage]) -> list[ModelMessage]:
    for index, message in enumerate(messages):
        message.metadata = {MESSAGE_ID_KEY: f"m{index}"}
    return messages


class Script:
    """Builds a transcript: prompts, assistant text, tool calls and their results."""

    def __init__(self) -> None:
        self.messages: list[ModelMessage] = []
        self.calls = 0

    def user(self, text: str) -> Script:
        self.messages.append(ModelRequest(parts=[UserPromptPart(text)]))
        return self

    def say(self, text: str) -> Script:
        self.messages.append(ModelResponse(parts=[TextPart(text)]))
        return self

    def call(self, tool: str, args: dict[str, Any], result: Any, *, text: str = "", outcome: str = "success") -> Script:
        self.calls += 1
        call_id = f"c{self.calls}"
        parts = [TextPart(text)] if text else []
        self.messages.append(ModelResponse(parts=[*parts, ToolCallPart(tool, args, call_id)]))
        self.messages.append(ModelRequest(parts=[ToolReturnPart(tool, result, call_id, outcome=outcome)]))  # pyright: ignore[reportArgumentType]
        return self

    def summary(self, **options: Any) -> str:
        request = SummaryRequest(tagged(self.messages), **options)
        return DeterministicSummarizer().summarize_sync(request)


def section(summary: str, title: str) -> str:
    return summary.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


# -- decisions -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        "I'll use the median instead of the mean for deal size, since a few deals dominate.",
        "We decided to keep the v1 endpoint until March.",
        "Going with Postgres for the job queue.",
        "Let's exclude the test accounts from every metric.",
        "For the cache, an LRU makes more sense than a TTL.",
        "We will store timestamps in UTC.",
        "Switching to httpx for the client.",
        "Decision: we use one TaskGroup per batch.",
        "We use feature flags for the rollout.",
    ],
)
def test_a_sentence_that_states_a_choice_is_a_decision(sentence: str) -> None:
    assert is_choice(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "Let me read src/app.py first.",
        "I'll check the logs.",
        "Running the tests again.",
        "Should we use Postgres instead of SQLite?",  # a question is open, not decided
        "The file has 120 lines.",
    ],
)
def test_narration_and_questions_are_not_decisions(sentence: str) -> None:
    assert not is_choice(sentence)


def test_each_turns_final_answer_and_the_choices_stated_mid_turn_are_kept() -> None:
    script = Script().user("Profile the export job")
    script.call(
        "run_sql", {"query": "select 1"}, "1 row", text="Timings vary a lot. I'll use p95 rather than the mean."
    )
    script.call("read_file", {"path": "jobs/export.py"}, "def export(): ...", text="Let me read the job.")
    script.say("The export spends 80% of its time in serialisation. We should switch to orjson.")
    script.user("Do it")
    summary = script.summary()
    decisions = section(summary, "Decisions")
    assert "I'll use p95 rather than the mean. (msg m1)" in decisions
    assert "The export spends 80% of its time in serialisation. We should switch to orjson. (msg m5)" in decisions
    assert "Let me read the job" not in decisions  # narration


def test_open_questions_of_the_final_answers_are_next_steps() -> None:
    summary = (
        Script().user("Chart churn").say("Churn was 4.2% in Q3. Should I split it by region?").user("ok").summary()
    )
    assert "Open question: Should I split it by region? (msg m1)" in section(summary, "Next steps")


# -- errors and their fixes ----------------------------------------------------------------------------------------


def test_a_failure_is_kept_with_what_fixed_it() -> None:
    script = Script().user("Fix the tests")
    script.call(
        "run_tests", {"command": "pytest tests/test_api.py"}, "E   KeyError: 'user'\n1 failed in 0.2s", outcome="failed"
    )
    script.call(
        "edit_file",
        {"path": "src/api.py", "old_string": "a", "new_string": "b"},
        "ok",
        text="The tests fail with KeyError: 'user'. The handler must default the user to anonymous.",
    )
    script.call("run_tests", {"command": "pytest tests/test_api.py"}, "3 passed in 0.2s")
    errors = section(script.summary(), "Errors")
    assert "run_tests failed (msg m2): E KeyError: 'user'" in errors
    assert "fixed (msg m6): The handler must default the user to anonymous." in errors  # the error not repeated
    assert "changed `src/api.py`" in errors and "then run_tests succeeded: pytest tests/test_api.py" in errors


def test_an_error_reported_as_ordinary_output_is_found_and_a_silent_fix_is_shown_by_what_changed() -> None:
    script = Script().user("Count the orders by region")
    error = 'ERROR:  column "regoin" does not exist\nLINE 1: SELECT regoin, count(*) FROM orders GROUP BY 1'
    script.call("run_sql", {"query": "SELECT regoin, count(*) FROM orders GROUP BY 1"}, error)
    script.call("run_sql", {"query": "SELECT region, count(*) FROM orders GROUP BY 1"}, "EMEA | 12")
    errors = section(script.summary(), "Errors")
    assert 'run_sql failed (msg m2): ERROR: column "regoin" does not exist' in errors
    assert "then run_sql succeeded: SELECT region, count(*) FROM orders GROUP BY 1" in errors


def test_a_change_to_another_file_does_not_fix_a_failed_edit() -> None:
    script = Script().user("Rename the handler")
    script.call("edit_file", {"path": "a.py", "old_string": "x"}, "old_string not found in a.py", outcome="retried")
    script.call("edit_file", {"path": "b.py", "old_string": "y"}, "ok")
    errors = section(script.summary(), "Errors")
    assert "edit_file failed (msg m2): old_string not found in a.py" in errors
    assert "not fixed in these messages" in errors


def test_a_failure_repeated_before_its_fix_is_one_entry() -> None:
    script = Script().user("Install it")
    for _ in range(3):
        script.call("shell", {"command": "pip install foo"}, "ERROR: No matching distribution found for foo")
    script.call("shell", {"command": "pip install foo==1.2"}, "Successfully installed foo-1.2")
    errors = section(script.summary(), "Errors")
    assert errors.count("ERROR: No matching distribution") == 1 and "shell failed x3" in errors


def test_failure_signatures_are_read_at_the_ends_of_an_output() -> None:
    source = "\n".join(f"    logger.error('step {i} failed')" for i in range(200))
    assert not looks_failed(source)  # code that logs errors is not a failure
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError: bad input'
    assert looks_failed("collected 3 items\n" + "." * 5_000 + "\n1 failed, 2 passed in 0.5s")
    assert failure_headline(trace) == "ValueError: bad input"
    assert failure_headline("fatal: not a git repository\nhint: run git init") == "fatal: not a git repository"


# -- files, todos, the latest request ------------------------------------------------------------------------------


def test_files_touched_are_listed_with_their_last_action() -> None:
    script = Script().user("Refactor")
    script.call("write_file", {"path": "src/a.py", "content": "x"}, "ok")
    script.call("edit_file", {"path": "src/a.py", "old_string": "x", "new_string": "y"}, "ok")
    script.call("read_file", {"path": "src/a.py"}, "y")
    script.call("read_file", {"path": "docs/b.md"}, "text")
    artifacts = section(script.summary(), "Artifacts")
    assert "`src/a.py` (changed by write_file, edit_file; last read_file at msg m5)" in artifacts
    assert "`docs/b.md` (used by read_file; msg m7)" in artifacts


def test_a_plan_tool_is_a_todo_list() -> None:
    plan = [{"step": "load the data", "status": "completed"}, {"step": "chart churn", "status": "in_progress"}]
    summary = Script().user("Go").call("update_plan", {"plan": plan}, "Plan updated").summary()
    assert "- [x] load the data (completed)\n- [~] chart churn (in_progress)" in section(summary, "Current state")


def test_the_latest_request_is_repeated_when_short_and_referred_to_when_long_and_kept() -> None:
    short = Script().user("Ship it").summary()
    assert short.endswith("## Latest user request\nShip it")
    document = "SPEC\n" + "\n".join(f"rule {i}: keep the API stable" for i in range(100))
    long = Script().user(document)
    referred = long.summary(latest_request_kept=True)
    assert document not in referred and "kept verbatim in the conversation after this summary" in referred
    assert referred.count("rule 50") == 0
    assert document in Script().user(document).summary(latest_request_kept=False)  # its only copy: whole


# -- budget, order, determinism, rolling ---------------------------------------------------------------------------


def test_when_it_must_cut_each_section_keeps_its_newest_entries() -> None:
    script = Script()
    for i in range(60):
        script.user(f"Task {i}").say(f"Task {i} is done. Decision {i}: we use option {i} for component {i}.")
    summary = DeterministicSummarizer(max_chars=3_000).summarize_sync(SummaryRequest(tagged(script.messages)))
    assert len(summary) <= 3_000
    decisions = section(summary, "Decisions")
    assert "option 59 for component 59" in decisions and "option 0 for component 0" not in decisions
    assert "earlier entries left out" in decisions


@pytest.mark.parametrize("family", ["coding", "analysis"])
def test_the_summary_is_byte_identical_for_the_same_input_and_within_budget(family: str) -> None:
    session = build_family_session(family, 400, 3)
    request = SummaryRequest(session.messages[:-20], latest_request_kept=True)
    first = DeterministicSummarizer().summarize_sync(request)
    again = DeterministicSummarizer().summarize_sync(
        SummaryRequest(copy.deepcopy(session.messages[:-20]), latest_request_kept=True)
    )
    assert first == again
    assert len(first) <= 12_000


def test_a_rolling_summary_keeps_the_earlier_decisions_errors_and_changed_files() -> None:
    first = Script().user("Start")
    first.call("write_file", {"path": "app/main.py", "content": "x"}, "ok")
    first.call("run_tests", {"command": "pytest"}, "FAILED test_main.py::test_x - AssertionError", outcome="failed")
    first.say("Done for today. We decided to pin pydantic to 2.11.")
    earlier = first.summary()
    later = Script().user("Continue").say("All green now.").summary(previous_summary=earlier)
    assert "We decided to pin pydantic to 2.11." in section(later, "Decisions")
    assert "FAILED test_main.py::test_x - AssertionError" in section(later, "Errors")
    assert "`app/main.py` (changed by write_file; msg m1)" in section(later, "Artifacts")
    assert later.count("## Decisions") == 1  # folded in, not nested
