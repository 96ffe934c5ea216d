"""What every benchmark script shares: the history generator, the sizes and targets, timing helpers.

`run.py`, `middleware.py` and `deep.py` import this module; none of them imports another's helpers, so there is
no import circle (`run.py` imports the other two to run them).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

SIZES = (1_000, 10_000, 50_000)
TARGET_SIZE = 10_000
TARGET_MEDIAN_S = 1e-3
TARGET_RATIO = 2.0
PAIRS_PER_PROMPT = 10  # a new user prompt every ~20 messages
RETURN_CHARS = 2_048

_CODE_LINES = [
    "def handler_{i}_{j}(request, *, retries=3):",
    "    payload = request.json().get('items', [])  # item {j}",
    "    for attempt in range(retries):",
    "        result = process_batch(payload, attempt=attempt, tag='t{i}')",
    "        if result.ok:",
    "            return result.value",
    "    raise RuntimeError(f'batch {i}.{j} failed after {{retries}} attempts')",
    "",
]


def tool_output(i: int) -> str:
    """About 2 KB of source-like text, distinct for every call."""
    lines = [f"# src/service/module_{i}.py (lines 1-200)"]
    j = 0
    while sum(len(line) + 1 for line in lines) < RETURN_CHARS:
        lines.extend(line.format(i=i, j=j) for line in _CODE_LINES)
        j += 1
    return "\n".join(lines)[:RETURN_CHARS]


def message_stream() -> Iterator[ModelMessage]:
    """An endless, realistic agent history: system prompt + user prompt, then (response, request) pairs.

    Most pairs are a tool call (`read_file` with dict args, the text that announces it) answered by a ~2 KB
    tool return; every `PAIRS_PER_PROMPT`-th pair is a plain text answer followed by a new user prompt.
    """
    yield ModelRequest(
        parts=[
            SystemPromptPart("You are a careful coding assistant. Read files before changing them."),
            UserPromptPart("Task 0: find why the batch handlers fail under load and propose a fix."),
        ]
    )
    pair = 0
    while True:
        pair += 1
        if pair % PAIRS_PER_PROMPT == 0:
            task = pair // PAIRS_PER_PROMPT
            yield ModelResponse(
                parts=[TextPart(f"Summary of step {task}: the retry loop in module_{pair} swallows the error. " * 3)]
            )
            yield ModelRequest(parts=[UserPromptPart(f"Task {task}: now apply the same fix to the next module.")])
        else:
            call_id = f"call_{pair:08d}"
            yield ModelResponse(
                parts=[
                    TextPart(f"Let me read module_{pair} to check the retry logic."),
                    ToolCallPart(
                        "read_file",
                        {"path": f"src/service/module_{pair}.py", "start": 1, "end": 200},
                        tool_call_id=call_id,
                    ),
                ]
            )
            yield ModelRequest(parts=[ToolReturnPart("read_file", tool_output(pair), tool_call_id=call_id)])


def build_history(size: int) -> tuple[list[ModelMessage], Iterator[ModelMessage]]:
    """A valid history of `size + 1` messages (it starts with one request and grows by pairs, so it ends with a
    request as a history about to be sent does) and the stream that continues it."""
    stream = message_stream()
    history = [next(stream) for _ in range(size + 1)]
    return history, stream


SUMMARY_SECTIONS = ("Intent", "Decisions", "Artifacts", "Errors", "Current state", "Next steps")


def summary_response(messages: Sequence[ModelMessage]) -> ModelResponse:
    """What a scripted summary model answers at once: the sections a summary must have and the latest user request
    quoted from the prompt (as a model would), with its usage reported (so pydantic-ai does not estimate it)."""
    from pydantic_ai.usage import RequestUsage

    prompt = str(messages[-1].parts[-1].content)
    latest = prompt.rsplit("<latest_user_request>\n", 1)[-1].split("\n</latest_user_request>", maxsplit=1)[0]
    body = "\n".join(f"## {title}\nsummarized" for title in SUMMARY_SECTIONS)
    return ModelResponse(
        parts=[TextPart(f"{body}\n## Latest user request\n{latest}")],
        usage=RequestUsage(input_tokens=len(prompt) // 4, output_tokens=50),
    )


@dataclass
class Timing:
    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p90(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, max(0, round(0.9 * len(ordered)) - 1))]


BATCH = 10
"""Timed calls in a row on one history before the next size gets its turn."""


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:,.2f} ms"
    return f"{seconds:,.2f} s"


_SECTION = re.compile(r"<!-- section:(?P<name>[\w-]+) -->\n.*?<!-- /section:(?P=name) -->\n", re.DOTALL)


def write_section(path: Path, name: str, lines: list[str]) -> None:
    """Put `lines` between `<!-- section:name -->` markers in the page at `path` (replacing that block, or before
    `## Environment`). Benchmarks that need a server (PostgreSQL) write their figures so; `run.py` keeps the blocks
    when it regenerates the page."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    block = "\n".join([f"<!-- section:{name} -->", *lines, f"<!-- /section:{name} -->"]) + "\n"
    blocks = {m.group("name"): m.group(0) for m in _SECTION.finditer(text)}
    if name in blocks:
        path.write_text(text.replace(blocks[name], block), encoding="utf-8")
    else:
        path.write_text(with_sections(text, [block]), encoding="utf-8")


def kept_sections(path: Path) -> list[str]:
    """The `<!-- section:... -->` blocks of the page at `path` (none when there is no page)."""
    return [m.group(0) for m in _SECTION.finditer(path.read_text(encoding="utf-8"))] if path.exists() else []


def with_sections(page: str, blocks: list[str]) -> str:
    """`page` with `blocks` inserted before its `## Environment` section (or at the end)."""
    if not blocks:
        return page
    joined = "\n".join(blocks)
    if "\n## Environment" in page:
        before, after = page.split("\n## Environment", 1)
        return before.rstrip("\n") + "\n\n" + joined + "\n## Environment" + after
    return page.rstrip("\n") + "\n\n" + joined


def environment() -> str:
    """Date, CPU, Python and the load average (this machine is shared: say how loaded it was)."""
    import os
    import platform
    from datetime import UTC, datetime

    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; {cpu} ({os.cpu_count()} logical cores); "
        f"Python {platform.python_version()}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
        "(1 / 5 / 15 min, `uptime`) at the end, other helpers' work sharing the cores"
    )
