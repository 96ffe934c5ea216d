"""Property tests: every processor, under every trigger/keep setting, hands the provider a valid history.

Histories come from `tests/strategies.py` (valid by construction, checked below). For each processor the
output must pass `validate_history(out, for_request=True)` with zero problems, keep the system prompt, leave
the input untouched, and do what the settings say (so the processors' own safety net, which returns the
input unchanged when a result would be invalid, cannot hide a broken cut).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pydantic_ai.models
from commit_check import tokens, without_commit_check
from example_counts import examples, in_two_tiers
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from strategies import (
    clear_tool_results_configs,
    damaged_histories,
    histories,
    keeps,
    limit_warner_configs,
    sliding_window_configs,
    summarization_configs,
)

from summarization_pydantic_ai import (
    ClearToolResultsProcessor,
    LimitWarnerProcessor,
    SlidingWindowProcessor,
    SummarizationProcessor,
    ToolPairIndex,
    count_tokens_approximately,
    find_safe_cutoff,
    is_summary_message,
    summary_info,
    validate_history,
)
from summarization_pydantic_ai._compaction import CompactionPlan, assemble, plan_compaction
from summarization_pydantic_ai._cutoff import inflight_start
from summarization_pydantic_ai._sizes import Measure, normalize_trigger
from summarization_pydantic_ai._working_set import WorkingSetOptions
from summarization_pydantic_ai.processors import CLEARED_METADATA_KEY, WARNING_METADATA_KEY

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

# The issue requires at least 2,000 examples per processor in CI: the slow tier draws them (`..._full` tests), the
# default run a quick sample. PROPERTY_EXAMPLES_SCALE=10 searches harder.
PER_PROCESSOR = {"quick": 300, "full": 2_000}
SECONDARY = examples(300)


# --- helpers --------------------------------------------------------------------------------------------------


class _ErrorRecorder(logging.Handler):
    """Collects the library's error logs (e.g. "compaction would break the history; history left unchanged")."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


_errors = _ErrorRecorder()
logging.getLogger("summarization_pydantic_ai").addHandler(_errors)


def run(processor: Any, messages: list[ModelMessage]) -> list[ModelMessage]:
    """Run a processor's plain (ProcessHistory) form and check it logged no error."""
    _errors.records.clear()
    out = asyncio.run(processor(messages))
    assert not _errors.records, [r.getMessage() for r in _errors.records]
    return out


def committed_or_too_large(processor: Any, messages: list[ModelMessage], out: list[ModelMessage]) -> list[ModelMessage]:
    """A compaction is committed only when it makes the history smaller. Returns what the processor built: `out`
    when it was committed, else the result it would have committed without that check (which must not be smaller)."""
    if not same_objects(out, messages):
        assert tokens(out) < tokens(messages)
        return out
    with without_commit_check():
        built = run(processor, messages)
    assert tokens(built) >= tokens(messages)
    return built


def fingerprint(messages: Sequence[ModelMessage]) -> list[tuple[int, ...]]:
    """Identities of every message, parts list, part and content: catches in-place edits of the input."""
    return [
        (id(m), id(m.parts), *(id(p) for p in m.parts), *(id(getattr(p, "content", None)) for p in m.parts))
        for m in messages
    ]


def is_warning(part: object) -> bool:
    return isinstance(part, SystemPromptPart) and WARNING_METADATA_KEY in (part.metadata or {})


def system_prompts(messages: Sequence[ModelMessage]) -> list[str]:
    """The conversation's system prompts, in order (limit warnings are not part of it)."""
    return [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, SystemPromptPart) and not is_warning(p)
    ]


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def assert_valid_output(before: list[ModelMessage], out: list[ModelMessage]) -> None:
    problems = validate_history(out, for_request=True)
    assert problems == [], [str(p) for p in problems]
    assert system_prompts(out) == system_prompts(before)
    first = before[0]
    if isinstance(first, ModelRequest) and any(isinstance(p, SystemPromptPart) for p in first.parts):
        # the system prompt stays first
        assert isinstance(out[0], ModelRequest)
        assert isinstance(out[0].parts[0], SystemPromptPart)


def tail_pair_safe(messages: Sequence[ModelMessage], cut: int) -> bool:
    """No kept message holds a tool result whose call was cut (checked naively, without ToolPairIndex)."""
    kept_calls = {
        p.tool_call_id
        for m in messages[cut:]
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    }
    return all(
        p.tool_call_id in kept_calls
        for m in messages[cut:]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    )


def trailing_exchange_start(messages: Sequence[ModelMessage]) -> int:
    """Where the in-flight exchange starts, worked out without the library: the last request that holds a user
    prompt or a tool result (with any summary after it), and the final response of a finished run. Earlier
    unanswered requests are not in flight: a cut may fall between them."""
    end = len(messages) - 1 if isinstance(messages[-1], ModelResponse) else len(messages)
    start = end
    while start > 0 and isinstance(messages[start - 1], ModelRequest):
        start -= 1
        if any(isinstance(p, UserPromptPart | ToolReturnPart) for p in messages[start].parts):
            break
    return start


def expected_plan(messages: list[ModelMessage], config: dict[str, Any]) -> CompactionPlan | None:
    """What a summarization or sliding-window processor with `config` must replace (None: leave as is)."""
    budget = max(config["max_tokens"] - config["reserve_output_tokens"], 1)
    size = Measure(len(messages), count_tokens_approximately(messages), budget)
    if not any(size.reaches(t) for t in normalize_trigger(config["trigger"])):
        return None
    # The default working set: a quarter of the budget, and room below the smallest message trigger.
    counts = [n for kind, n in normalize_trigger(config["trigger"]) if kind == "messages"]
    working_set = WorkingSetOptions(tokens=budget // 4, max_messages=min(counts) - 3 if counts else None)
    return plan_compaction(
        messages, config["keep"], keep_head=config["keep_head"], max_tokens=budget, working_set=working_set
    )


def check_compaction(
    messages: list[ModelMessage], out: list[ModelMessage], plan: CompactionPlan | None
) -> ModelMessage:
    """The output is exactly head + (split system prompt) + one summary + the working set + the untouched tail.
    Returns the summary."""
    assert plan is not None
    head = messages[: plan.head_end]
    tail = messages[plan.cutoff :]
    kept = list(plan.preserved_messages)
    while kept and isinstance(kept[0], ModelRequest):
        kept.pop(0)  # lone (pinned) requests join the summary's request
    assert len(out) == len(head) + (plan.system_head is not None) + 1 + len(kept) + len(tail)
    assert same_objects(out[: len(head)], head)
    assert same_objects(out[len(out) - len(tail) :], tail)  # the kept tail is the very same objects
    assert same_objects(out[len(out) - len(tail) - len(kept) : len(out) - len(tail)], kept)
    if plan.system_head is not None:
        assert system_prompts([out[len(head)]]) == system_prompts([messages[0]])
    summary = out[len(out) - len(tail) - len(kept) - 1]
    assert is_summary_message(summary)
    return summary


def iter_requests_parts(messages: Sequence[ModelMessage]) -> Iterator[tuple[int, int, Any]]:
    for i, m in enumerate(messages):
        if isinstance(m, ModelRequest):
            for j, p in enumerate(m.parts):
                yield i, j, p


# --- the generated histories ----------------------------------------------------------------------------------


@SECONDARY
@given(histories(for_request=True))
def test_generated_request_histories_are_valid(messages: list[ModelMessage]) -> None:
    assert validate_history(messages, for_request=True) == []
    assert isinstance(messages[-1], ModelRequest)


@SECONDARY
@given(histories(for_request=False))
def test_generated_finished_histories_are_valid(messages: list[ModelMessage]) -> None:
    assert validate_history(messages, for_request=False) == []
    assert isinstance(messages[-1], ModelResponse)


# --- every processor ------------------------------------------------------------------------------------------


def _summarization_output_is_valid(messages: list[ModelMessage], config: dict[str, Any]) -> None:
    processor = SummarizationProcessor(None, **config)
    before = fingerprint(messages)
    out = run(processor, messages)
    assert fingerprint(messages) == before
    assert_valid_output(messages, out)
    plan = expected_plan(messages, config)
    if plan is None:
        assert same_objects(out, messages)
        return
    out = committed_or_too_large(processor, messages, out)
    summary = check_compaction(messages, out, plan)
    info = summary_info(summary)
    assert info is not None
    assert info["covered_messages"] == len(plan.span)
    assert info["summarizer"] == "deterministic"


test_summarization_output_is_valid, test_summarization_output_is_valid_full = in_two_tiers(
    _summarization_output_is_valid, histories(), summarization_configs(), **PER_PROCESSOR
)


def _sliding_window_output_is_valid(messages: list[ModelMessage], config: dict[str, Any]) -> None:
    processor = SlidingWindowProcessor(**config)
    before = fingerprint(messages)
    out = run(processor, messages)
    assert fingerprint(messages) == before
    assert_valid_output(messages, out)
    plan = expected_plan(messages, config)
    if plan is None:
        assert same_objects(out, messages)
        return
    out = committed_or_too_large(processor, messages, out)
    marker = check_compaction(messages, out, plan)
    assert (summary_info(marker) or {}).get("kind") == "window"


test_sliding_window_output_is_valid, test_sliding_window_output_is_valid_full = in_two_tiers(
    _sliding_window_output_is_valid, histories(), sliding_window_configs(), **PER_PROCESSOR
)


def _clear_tool_results_output_is_valid(messages: list[ModelMessage], config: dict[str, Any]) -> None:
    processor = ClearToolResultsProcessor(**config)
    before = fingerprint(messages)
    out = run(processor, messages)
    assert fingerprint(messages) == before
    assert_valid_output(messages, out)
    # Only tool-return contents change: same messages, same parts in the same places, same call ids.
    assert len(out) == len(messages)
    returns_before = [(i, j, p) for i, j, p in iter_requests_parts(messages) if isinstance(p, ToolReturnPart)]
    returns_after = [(i, j, p) for i, j, p in iter_requests_parts(out) if isinstance(p, ToolReturnPart)]
    assert [(i, j, p.tool_call_id) for i, j, p in returns_before] == [
        (i, j, p.tool_call_id) for i, j, p in returns_after
    ]
    cleared = [p for _, _, p in returns_after if CLEARED_METADATA_KEY in (p.metadata or {})]
    assert all(p.tool_name not in config["exclude_tools"] for p in cleared)
    recent = returns_after[len(returns_after) - config["keep_last"] :] if config["keep_last"] else []
    assert not any(CLEARED_METADATA_KEY in (p.metadata or {}) for _, _, p in recent)  # the last N stay whole
    for old, new in zip(messages, out, strict=True):
        if old is not new:
            assert isinstance(old, ModelRequest) and isinstance(new, ModelRequest)
            assert len(old.parts) == len(new.parts)
            for p_old, p_new in zip(old.parts, new.parts, strict=True):
                assert p_old is p_new or (isinstance(p_new, ToolReturnPart) and CLEARED_METADATA_KEY in p_new.metadata)


test_clear_tool_results_output_is_valid, test_clear_tool_results_output_is_valid_full = in_two_tiers(
    _clear_tool_results_output_is_valid, histories(), clear_tool_results_configs(), **PER_PROCESSOR
)


def _limit_warner_output_is_valid(messages: list[ModelMessage], config: dict[str, Any]) -> None:
    processor = LimitWarnerProcessor(**config)
    before = fingerprint(messages)
    out = run(processor, messages)
    assert fingerprint(messages) == before
    assert_valid_output(messages, out)
    warnings = [p for _, _, p in iter_requests_parts(out) if is_warning(p)]
    assert len(warnings) <= 1
    assert same_objects(out[: len(messages)], messages)
    if warnings:
        assert len(out) == len(messages) + 1 and out[-1].parts == [warnings[0]]
        again = run(processor, out)  # the warning is replaced, never piled up
        assert len([p for _, _, p in iter_requests_parts(again) if is_warning(p)]) == 1
        assert_valid_output(messages, again)


test_limit_warner_output_is_valid, test_limit_warner_output_is_valid_full = in_two_tiers(
    _limit_warner_output_is_valid, histories(), limit_warner_configs(), **PER_PROCESSOR
)


# --- processors in sequence -----------------------------------------------------------------------------------

_PROCESSORS = st.one_of(
    summarization_configs().map(lambda c: SummarizationProcessor(None, **c)),
    sliding_window_configs().map(lambda c: SlidingWindowProcessor(**c)),
    clear_tool_results_configs().map(lambda c: ClearToolResultsProcessor(**c)),
    limit_warner_configs().map(lambda c: LimitWarnerProcessor(**c)),
)


@SECONDARY
@given(histories(), st.lists(_PROCESSORS, min_size=2, max_size=5))
def test_processors_in_sequence_keep_the_history_valid(messages: list[ModelMessage], processors: list[Any]) -> None:
    """The output of one processor (summaries, window markers, cleared results, warnings) is valid input for
    the next, and the same processor applied again."""
    current = messages
    for processor in [*processors, *processors]:
        current = run(processor, current)
        assert_valid_output(messages, current)


@SECONDARY
@given(histories(for_request=False), _PROCESSORS)
def test_processors_on_a_finished_run_keep_it_valid(messages: list[ModelMessage], processor: Any) -> None:
    """A finished run's `all_messages()` (ending with the final response) stays valid too."""
    out = run(processor, messages)
    problems = validate_history(out, for_request=isinstance(out[-1], ModelRequest))
    assert problems == [], [str(p) for p in problems]
    assert system_prompts(out) == system_prompts(messages)
    if isinstance(processor, SummarizationProcessor | SlidingWindowProcessor):
        assert out[-1] is messages[-1]  # the final answer is never summarized away


@SECONDARY
@given(damaged_histories(), _PROCESSORS)
def test_processors_never_crash_nor_add_problems_to_broken_input(messages: list[ModelMessage], processor: Any) -> None:
    """User code can hand a processor a broken history: it must return (no exception, no endless loop) and the
    result has no kind of problem the input did not already have."""
    before = {p.kind for p in validate_history(messages, for_request=True)}
    out = asyncio.run(processor(messages))
    after = {p.kind for p in validate_history(out, for_request=True)}
    assert after <= before, (before, after)


# --- cutoffs --------------------------------------------------------------------------------------------------


@st.composite
def _cut_cases(draw: Any) -> tuple[list[ModelMessage], Any, int, bool]:
    for_request = draw(st.booleans())
    return draw(histories(for_request=for_request)), draw(keeps()), draw(st.integers(1_000, 60_000)), for_request


@examples(600)
@given(_cut_cases())
def test_cutoff_never_orphans_a_result(case: tuple[list[ModelMessage], Any, int, bool]) -> None:
    messages, keep, max_tokens, for_request = case
    cut = find_safe_cutoff(messages, keep, max_tokens=max_tokens)
    assert 0 <= cut <= len(messages)
    assert tail_pair_safe(messages, cut)
    assert inflight_start(messages) == trailing_exchange_start(messages)
    assert cut <= trailing_exchange_start(messages)  # the in-flight exchange is always kept
    if not for_request:
        assert cut < len(messages)  # the final response too
    if isinstance(keep, int):
        assert len(messages) - cut >= min(keep, len(messages))
    # the index agrees: no kept message answers a call before the cut
    index = ToolPairIndex.build(messages)
    assert all(index.earliest_call_for_message[i] >= cut for i in range(cut, len(messages)))


@SECONDARY
@given(histories(), st.integers(0, 60), st.integers(0, 60))
def test_cutoff_is_monotonic_in_keep(messages: list[ModelMessage], a: int, b: int) -> None:
    small, large = sorted((a, b))
    assert find_safe_cutoff(messages, large) <= find_safe_cutoff(messages, small)


@SECONDARY
@given(histories())
def test_keep_zero_keeps_the_in_flight_exchange(messages: list[ModelMessage]) -> None:
    cut = find_safe_cutoff(messages, 0)
    start = trailing_exchange_start(messages)
    assert cut <= start
    pending = {p.tool_call_id for _, _, p in iter_requests_parts(messages[start:]) if isinstance(p, ToolReturnPart)}
    if pending:
        caller = max(
            i
            for i, m in enumerate(messages)
            if isinstance(m, ModelResponse) and any(getattr(p, "tool_call_id", None) in pending for p in m.parts)
        )
        assert cut <= caller
        assert isinstance(messages[start - 1], ModelResponse)
    assert tail_pair_safe(messages, cut)


@examples(600)
@given(_cut_cases(), st.integers(0, 3))
def test_assembled_head_summary_tail_is_valid(case: tuple[list[ModelMessage], Any, int, bool], keep_head: int) -> None:
    messages, keep, max_tokens, for_request = case
    plan = plan_compaction(messages, keep, keep_head=keep_head, max_tokens=max_tokens)
    if plan is None:
        return
    assert 0 <= plan.head_end < plan.cutoff <= len(messages)
    assert plan.span and not any(is_summary_message(m) for m in plan.span)
    summary = ModelRequest(parts=[CompactionPart(content="summary")])
    out = assemble(messages, plan, summary)
    problems = validate_history(out, for_request=for_request)
    assert problems == [], [str(p) for p in problems]
    assert system_prompts(out) == system_prompts(messages)
    assert same_objects(out[len(out) - (len(messages) - plan.cutoff) :], messages[plan.cutoff :])
    # a user turn survives: the summary never stands alone
    assert any(
        isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart | ToolReturnPart) for p in m.parts)
        for m in out
    )
