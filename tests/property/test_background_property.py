"""Background compaction commits a summary prepared on an earlier history (`background_start`): whatever the history
and wherever the preparation began, the committed history is valid and the messages added since stay in the tail.

The preparation plans the span the next compaction would replace on the history as it was then (a prefix ending in a
request); at the trigger, the middleware takes it when its span starts where the plan of the current history does
and ends no later (`BackgroundCompaction.take`), and assembles it with the current history.
"""

from __future__ import annotations

from typing import Any

import pydantic_ai.models
from example_counts import examples
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest
from strategies import histories, histories_with_faults, keeps

from summarization_pydantic_ai import is_summary_message, validate_history
from summarization_pydantic_ai._compaction import assemble_merged, build_summary_message, plan_compaction
from summarization_pydantic_ai._cutoff import cut_keeps_pairs
from summarization_pydantic_ai._summary_run import SummaryOutcome
from summarization_pydantic_ai._working_set import WorkingSetOptions
from summarization_pydantic_ai.processors._summary_plan import new_problems

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False


@examples(400)
@given(st.one_of(histories(max_turns=6), histories_with_faults()), keeps(), st.integers(0, 4), st.data())
def test_a_summary_prepared_earlier_commits_a_valid_history(
    messages: list[ModelMessage], keep: Any, keep_head: int, data: st.DataObject
) -> None:
    ends = [i + 1 for i, m in enumerate(messages) if isinstance(m, ModelRequest)]
    assume(ends)
    earlier = messages[: data.draw(st.sampled_from(ends), label="preparation began at")]
    working_set = WorkingSetOptions(tokens=5_000)
    plan = lambda history: plan_compaction(  # noqa: E731
        history, keep, keep_head=keep_head, max_tokens=20_000, working_set=working_set
    )
    then, now = plan(earlier), plan(messages)
    assume(then is not None and now is not None and then.head_end == now.head_end and then.cutoff <= now.cutoff)
    assert then is not None
    assume(cut_keeps_pairs(messages, then.cutoff))  # take() drops a preparation a late result made unsafe

    outcome = SummaryOutcome(text="Summary of the earlier work.", summarizer="deterministic", duration_s=0.0)
    result, merged = assemble_merged(messages, then, build_summary_message(then, outcome, focus=None))

    assert new_problems(messages, result) == []
    assert validate_history(result) == [] or validate_history(messages) != []
    assert is_summary_message(merged) and len(result) <= len(messages)
    # What came after the preparation began stays as it is (a request opening the tail joins the summary's request).
    added = [p for m in messages[max(then.cutoff, len(earlier)) :] for p in m.parts]
    parts = [p for m in result for p in m.parts]
    assert all(a is b for a, b in zip(parts[len(parts) - len(added) :], added, strict=True))
