"""Property tests (issue 10, scope 3): whatever the summarizer answers (a good summary, one missing a section or the
latest request, empty text, an exception), the committed summary has every required heading, the latest user
request verbatim and every file path the replaced span's tool calls touched, and the history stays valid."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any

import pydantic_ai.models
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage
from strategies import histories, keeps

from summarization_pydantic_ai import (
    DEFAULT_REQUIRED_SECTIONS,
    SummarizationProcessor,
    SummaryRequest,
    summary_part,
    validate_history,
)
from summarization_pydantic_ai.summarize import latest_user_request
from summarization_pydantic_ai.summarize._latest import refers_to_latest
from summarization_pydantic_ai.summarize._validate import summary_problems, touched_paths

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

_SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))

ANSWERS = ("good", "no-section", "no-latest", "empty", "raises")


class Answering:
    """A summarizer whose answers follow a drawn script (the last one repeats)."""

    name = "scripted"

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.calls = 0

    async def summarize(self, request: SummaryRequest) -> str:
        kind = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        titles = list(DEFAULT_REQUIRED_SECTIONS)
        if kind == "no-section":
            titles.pop(self.calls % len(titles))
        latest = "" if kind == "no-latest" else (request.latest_user_request or "")
        if kind == "empty":
            return "  "
        if kind == "raises":
            raise RuntimeError("provider down")
        return "\n".join(f"## {t}\nok" for t in titles) + f"\n{latest}"


def problems(messages: list[ModelMessage]) -> Counter[tuple[str, str | None]]:
    return Counter((p.kind, p.tool_call_id) for p in validate_history(messages))


@settings(max_examples=int(300 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(max_turns=6), keeps(), st.lists(st.sampled_from(ANSWERS), min_size=1, max_size=3))
def test_the_committed_summary_always_passes_the_checks(
    messages: list[ModelMessage], keep: Any, script: list[str]
) -> None:
    summarizer = Answering(script)
    processor = SummarizationProcessor(summarizer, trigger=None, keep=keep, max_tokens=20_000)
    out = asyncio.run(processor.compact(messages))
    assert not problems(out) - problems(messages)
    assert summarizer.calls <= 2  # asked at most twice
    before = {id(m) for m in messages}
    summaries = [part for m in out if id(m) not in before and (part := summary_part(m)) is not None]
    if not summaries:
        return  # nothing to summarize
    text = str(summaries[0].content)
    latest = latest_user_request(messages)
    # A long latest request stays verbatim beside the summary, which refers to it instead of copying it.
    required = None if refers_to_latest(latest, kept=True) else latest
    assert summary_problems(text, required_sections=DEFAULT_REQUIRED_SECTIONS, latest_request=required) == []
    # The user's latest request survives: kept verbatim as a prompt, or (a prompt a tool's document followed, the
    # working set keeping the document's request) written verbatim into the summary.
    assert latest_user_request(out) == latest or (
        latest is not None and " ".join(latest.split()) in " ".join(text.split())
    )
    after = {id(m) for m in out}
    replaced = [m for m in messages if id(m) not in after]
    for path in touched_paths(replaced):
        assert path in text
