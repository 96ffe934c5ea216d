"""Property tests: a phase checkpoint always leaves a valid history that starts with the original instructions and
the checkpoint, and loses nothing: every message is either still in the context or archived, verbatim."""

from __future__ import annotations

import asyncio

import pydantic_ai.models
from commit_check import without_commit_check
from example_counts import examples
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from strategies import histories

from summarization_pydantic_ai import PhaseCheckpoints, summary_info, validate_history

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False


def checkpoint_parts(message: ModelMessage) -> list[CompactionPart]:
    return [p for p in message.parts if isinstance(p, CompactionPart) and summary_info(message) is not None]


async def apply(phases: PhaseCheckpoints, messages: list[ModelMessage], name: str) -> list[ModelMessage]:
    """Checkpoint phase `name`, even when the checkpoint would not make these short histories smaller (then it
    is deferred: tests/property/test_never_grows.py)."""
    phases.mark_done(name, state={"phase": name}, objectives=[f"finish {name}"])
    with without_commit_check():
        result = await phases(messages)
    assert phases.pending == ()
    return result


@examples(120)
@given(history=histories(for_request=True, max_turns=5), more=st.integers(0, 3))
def test_checkpoints_keep_the_history_valid_and_lose_nothing(history: list[ModelMessage], more: int) -> None:
    phases = PhaseCheckpoints()
    original = list(history)
    result = asyncio.run(apply(phases, history, "one"))

    assert validate_history(result) == []
    first = result[0]
    assert isinstance(first, ModelRequest)
    [part] = [p for p in first.parts if isinstance(p, CompactionPart) and "Completed phases: one." in (p.content or "")]
    info = summary_info(first)
    assert info is not None and info["kind"] == "phase_checkpoint"
    assert sum(1 for m in result for p in m.parts if p is part) == 1

    # Nothing lost: each original message is archived, still in the context, or folded into the checkpoint request
    # (its parts there verbatim, a summary's text carried by the checkpoint).
    archived = asyncio.run(phases.read_phase("one")).messages
    kept = {id(m) for m in result}
    folded = {id(p) for p in first.parts}
    for message in original:
        if any(m is message for m in archived) or id(message) in kept:
            continue
        assert isinstance(message, ModelRequest), message
        for p in message.parts:
            assert id(p) in folded or (isinstance(p, CompactionPart) and (p.content or "") in (part.content or "")), p

    # A later phase builds on the checkpoint: still valid, the instructions stay first, one checkpoint.
    later = list(result)
    for n in range(more):
        later += [ModelResponse(parts=[TextPart(f"answer {n}")]), ModelRequest(parts=[UserPromptPart(f"next {n}")])]
    second = asyncio.run(apply(phases, later, "two"))
    assert validate_history(second) == []
    instructions = int(info["instruction_parts"])
    assert second[0].parts[:instructions] == first.parts[:instructions]
    assert sum(len(checkpoint_parts(m)) for m in second) == 1
    assert "Completed phases: one, two." in str(checkpoint_parts(second[0])[0].content)
    if more:  # the input the first checkpoint carried opened phase two: it is archived with it, verbatim
        carried = first.parts[first.parts.index(part) + 1 :]
        archived_parts = {id(p) for m in asyncio.run(phases.read_phase("two")).messages for p in m.parts}
        assert all(id(p) in archived_parts for p in carried)
