"""Property tests: `load()` returns the same working context whichever way it reads the file (the resume point
beside it, the whole file decoded at once, the writer's index, the full scan of a damaged file), whatever the
history holds: new messages, newer versions of old ones, summaries that say what they kept (middleware) or only
what they covered (plain processors), summaries replaced by later summaries."""

from __future__ import annotations

import os
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)

from summarization_pydantic_ai import (
    JsonHistoryStore,
    ensure_message_id,
    get_message_id,
    read_records,
    working_context,
)
from summarization_pydantic_ai._messages import SUMMARY_METADATA_KEY
from summarization_pydantic_ai.store._resume import load_from_point, point_path, read_point

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))


def _message(i: int) -> ModelMessage:
    message: ModelMessage = (
        ModelRequest(parts=[UserPromptPart(f"question {i}")])
        if i % 2 == 0
        else ModelResponse(parts=[TextPart(f"answer {i}")])
    )
    ensure_message_id(message)
    return message


def _summary(i: int, ids: list[str], rng: random.Random, summaries: list[str]) -> ModelMessage:
    if not ids:
        return _message(i)
    covered = rng.sample(ids, rng.randint(0, len(ids)))
    info: dict[str, Any] = {"covers": covered, "replaces_summaries": rng.sample(summaries, min(len(summaries), 1))}
    if rng.random() < 0.6:  # the middleware's summaries say what the working context kept around them
        info["working_before"] = rng.sample(ids, rng.randint(0, min(3, len(ids))))
        info["working_after"] = rng.sample(ids, rng.randint(0, min(4, len(ids))))
    summary = ModelRequest(parts=[CompactionPart(content=f"summary {i}", metadata={SUMMARY_METADATA_KEY: info})])
    ensure_message_id(summary)
    return summary


def _edited(message: ModelMessage, i: int) -> ModelMessage:
    """A newer version: a response's text changed, a part added to a request, or (every third edit) a request's
    parts replaced (a summary edited into a plain request)."""
    if isinstance(message, ModelResponse):
        return replace(message, parts=[TextPart(f"edited {i}")])
    if i % 3 == 0:
        return replace(message, parts=[UserPromptPart(f"edited {i}")])
    return replace(message, parts=[*message.parts, UserPromptPart(f"edited {i}")])


def _dumped(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def _history(path: Path, seed: int, appends: int) -> JsonHistoryStore:
    """A store written by `appends` random appends: new messages, summaries, newer versions of old messages."""
    rng = random.Random(seed)
    store = JsonHistoryStore(path)
    recorded: list[ModelMessage] = []
    summaries: list[str] = []
    counter = 0
    for _ in range(appends):
        batch: list[ModelMessage] = []
        for _ in range(rng.randint(1, 4)):
            counter += 1
            roll = rng.random()
            if roll < 0.2 and recorded:
                batch.append(_edited(rng.choice(recorded), counter))  # a newer version (maybe of a summary)
            elif roll < 0.35:
                ids = [i for m in recorded if (i := get_message_id(m)) is not None]
                summary = _summary(counter, ids, rng, summaries)
                summaries += [get_message_id(summary) or ""]
                batch.append(summary)
            else:
                batch.append(_message(counter))
        store.append_sync(batch)
        recorded += batch
    return store


@settings(max_examples=int(60 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), appends=st.integers(1, 14))
def test_every_way_of_loading_returns_the_same_working_context(tmp_path_factory: Any, seed: int, appends: int) -> None:
    path = tmp_path_factory.mktemp("resume") / "messages.json"
    writer = _history(path, seed, appends)
    expected = _dumped(working_context([r.message for r in read_records(path).records]))
    assert _dumped(writer.load_sync()) == expected  # the writer's index
    writer.close()
    point = read_point(path)
    assert point is not None
    through_point = load_from_point(path, point)  # the point describes the file: it is used, not a fallback
    assert through_point is not None and _dumped(through_point) == expected
    assert _dumped(JsonHistoryStore.reader(path).load_sync()) == expected
    reopened = JsonHistoryStore(path)
    assert _dumped(reopened.load_sync()) == expected  # a new writer, through the point
    reopened.close()
    point_path(path).unlink()
    assert _dumped(JsonHistoryStore.reader(path).load_sync()) == expected  # the whole file, decoded at once
