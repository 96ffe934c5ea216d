"""Property tests: cutting a history down to the agent's memory never splits a tool call from its results, never
adds a fault, keeps the latest user request whole, and keeps the most recent messages as they were."""

from __future__ import annotations

import os
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from strategies import histories, histories_with_faults

from summarization_pydantic_ai import find_safe_cutoff, is_summary_message, validate_history
from summarization_pydantic_ai.context_manager._memory_file import memory_history, memory_text

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))
MEMORY = memory_text("- task: the user's request\n- next: go on", "memory/short_term/recent.md")


def _problems(messages: list[ModelMessage]) -> Counter[tuple[str, str | None]]:
    return Counter((p.kind, p.tool_call_id) for p in validate_history(messages))


def _latest_prompt(messages: list[ModelMessage]) -> list[UserPromptPart]:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            prompts = [p for p in message.parts if isinstance(p, UserPromptPart)]
            if prompts:
                return prompts
    return []


@settings(max_examples=int(200 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(histories(max_turns=6), histories_with_faults()), st.integers(0, 3_000))
def test_cutting_to_the_memory_is_pair_safe_and_keeps_the_latest_request(
    messages: list[ModelMessage], keep_tokens: int
) -> None:
    built = memory_history(messages, MEMORY, keep_tokens=keep_tokens)
    if built is None:  # nothing before the kept tail: the history is left as it is
        return
    out, merged = built
    assert not _problems(out) - _problems(messages)
    assert _latest_prompt(out) == _latest_prompt(messages)
    assert merged in out and is_summary_message(merged)
    assert any(isinstance(p, CompactionPart) and p.content == MEMORY for p in merged.parts)
    # One response's results are all kept or all replaced.
    kept = {id(p) for m in out if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)}
    for message in messages:
        if isinstance(message, ModelRequest):
            ids = {id(p) for p in message.parts if isinstance(p, ToolReturnPart)}
            assert not ids or ids <= kept or not ids & kept
    # What follows the memory is the most recent messages, unchanged; with no room, only the in-flight exchange.
    tail = out[out.index(merged) + 1 :]
    assert tail == messages[len(messages) - len(tail) :]
    if keep_tokens == 0:
        assert len(messages) - len(tail) >= find_safe_cutoff(messages, 0)
