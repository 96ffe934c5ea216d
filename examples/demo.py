"""Run offline agents through the context processors and print what they did.

    python examples/demo.py

No network and no API key: the agents' model is a scripted `FunctionModel` that reads eight files (each tool
result is about 1,400 tokens) and then answers. The same script runs three times:

1. without processors, as the baseline;
2. with `SummarizationProcessor` (deterministic summarizer, `model=None`) and `LimitWarnerProcessor`;
3. with `ClearToolResultsProcessor`, then with `SlidingWindowProcessor`.

For each run it prints the events the processors reported, the size of every model request, the final history
before/after, and checks it with `validate_history`. Exits non-zero if a check fails.

pydantic-ai merges consecutive requests before calling the model (a kept system prompt and the summary after it
become one), so a model request can show one message fewer than the processor's event reports.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from summarization_pydantic_ai import (
    ClearToolResultsProcessor,
    CompactionCompleted,
    CompactionStarted,
    ContextEvent,
    LimitWarnerProcessor,
    LimitWarningIssued,
    SlidingWindowProcessor,
    SummarizationProcessor,
    ToolResultsCleared,
    WindowTrimmed,
    count_tokens_approximately,
    is_summary_message,
    summary_info,
    summary_part,
    validate_history,
)

FILES = [f"src/app/module_{i}.py" for i in range(1, 9)]
PROMPT = "Read every module under src/app/ and tell me which functions lack tests."
SYSTEM_PROMPT = "You are a code reviewer. Use read_file to inspect files."


def file_body(path: str) -> str:
    """About 5,600 characters (~1,400 tokens) of fake source code."""
    lines = [f"# {path}"]
    lines += [f"def handler_{i}(request):\n    return process(request, retries={i})  # line {i}" for i in range(70)]
    return "\n".join(lines)


def scripted_model() -> FunctionModel:
    """One `read_file` call per request until every file is read, then a final answer."""
    step = 0

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal step
        step += 1
        tokens = count_tokens_approximately(messages)
        print(f"    model request {step}: {len(messages):2d} messages, ~{tokens:,} tokens")
        if step <= len(FILES):
            args = {"path": FILES[step - 1]}
            return ModelResponse(parts=[ToolCallPart("read_file", args, tool_call_id=f"call_{step}")])
        text = (
            f"I read {len(FILES)} modules. handler_0 to handler_69 have no tests.\n"
            "Next: write tests for src/app/module_1.py first."
        )
        return ModelResponse(parts=[TextPart(text)])

    return FunctionModel(respond, model_name="scripted")


def make_agent(capabilities: Sequence[Any]) -> Agent[None, str]:
    agent = Agent(scripted_model(), system_prompt=SYSTEM_PROMPT, capabilities=list(capabilities))

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Return the contents of a file."""
        return file_body(path)

    return agent


def describe(event: ContextEvent) -> str:
    if isinstance(event, CompactionCompleted):
        return (
            f"CompactionCompleted: {event.summarized_messages} messages summarized by {event.summarizer!r}; "
            f"{event.messages_before} -> {event.messages_after} messages, "
            f"~{event.tokens_before:,} -> ~{event.tokens_after:,} tokens"
        )
    if isinstance(event, ToolResultsCleared):
        return (
            f"ToolResultsCleared: {event.cleared} results ({', '.join(event.tool_call_ids)}), "
            f"~{event.tokens_reclaimed:,} tokens reclaimed"
        )
    if isinstance(event, WindowTrimmed):
        return f"WindowTrimmed: dropped {event.dropped_messages} messages, {event.messages_after} left"
    if isinstance(event, CompactionStarted):
        return (
            f"CompactionStarted: summarizing messages {event.head_end}..{event.cutoff - 1} of {event.messages_before}"
        )
    if isinstance(event, LimitWarningIssued):
        return f"LimitWarningIssued: {event.text!r}"
    return repr(event)


class EventLog(list[ContextEvent]):
    """The processors' `event_callback`: records each event and prints it as it happens."""

    def __call__(self, event: ContextEvent) -> None:
        self.append(event)
        print(f"      event  {describe(event)}")


class Report:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        print(f"  [{'ok' if ok else 'FAIL'}] {what}")
        if not ok:
            self.failures.append(what)


async def run(title: str, capabilities: Sequence[Any]) -> list[ModelMessage]:
    print(f"\n=== {title} ===")
    result = await make_agent(capabilities).run(PROMPT)
    print(f"  output {result.output.splitlines()[0]!r}")
    return result.all_messages()


def size(messages: Sequence[ModelMessage]) -> str:
    return f"{len(messages)} messages, ~{count_tokens_approximately(messages):,} tokens"


async def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="  log    %(levelname)s %(name)s: %(message)s")
    report = Report()

    baseline = await run("Baseline: no processors", [])
    print(f"  final history: {size(baseline)}")

    # 1. Summarization (deterministic, no LLM) + limit warnings.
    events = EventLog()
    summarization = SummarizationProcessor(
        model=None,  # the deterministic summarizer: no model call
        trigger=("tokens", 8_000),  # fires at or above 8,000 tokens
        keep=("messages", 4),  # the last two tool exchanges stay verbatim
        event_callback=events,
    )
    warner = LimitWarnerProcessor(
        warn_at=0.8, max_iterations=len(FILES) + 1, max_context_tokens=16_000, event_callback=events
    )
    summarized = await run("SummarizationProcessor + LimitWarnerProcessor", [summarization, warner])
    print(f"  final history: {size(baseline)} (baseline) -> {size(summarized)}")
    summaries = [m for m in summarized if is_summary_message(m)]
    compactions = [e for e in events if isinstance(e, CompactionCompleted)]
    report.check(len(compactions) == 1, f"compaction fired once ({len(compactions)})")
    report.check(len(summaries) == 1, "the final history holds the summary")
    if summaries:
        part = summary_part(summaries[-1])
        info = summary_info(summaries[-1]) or {}
        text = (part.content or "") if part is not None else ""
        print("  summary metadata:", {k: info[k] for k in ("covered_messages", "summarizer") if k in info})
        print("  summary text:")
        print(textwrap.indent(text, "    | ", lambda line: True))
        report.check(PROMPT in text, "the summary repeats the latest user request verbatim")
    report.check(any(isinstance(e, LimitWarningIssued) for e in events), "a limit warning was issued")
    problems = validate_history(summarized, for_request=False)
    report.check(problems == [], f"validate_history(result.all_messages(), for_request=False) == {problems}")

    # 2. Clearing old tool results, in batches.
    events = EventLog()
    clearing = ClearToolResultsProcessor(keep_last=2, clear_at_least=3_000, event_callback=events)
    cleared = await run("ClearToolResultsProcessor", [clearing])
    print(f"  final history: {size(baseline)} (baseline) -> {size(cleared)}")
    report.check(any(isinstance(e, ToolResultsCleared) for e in events), "old tool results were cleared")
    problems = validate_history(cleared, for_request=False)
    report.check(problems == [], f"validate_history(result.all_messages(), for_request=False) == {problems}")

    # 3. Sliding window: drop the oldest messages, no summary.
    events = EventLog()
    window = SlidingWindowProcessor(trigger=("messages", 9), keep=("messages", 4), event_callback=events)
    windowed = await run("SlidingWindowProcessor", [window])
    print(f"  final history: {size(baseline)} (baseline) -> {size(windowed)}")
    report.check(any(isinstance(e, WindowTrimmed) for e in events), "the window trimmed the history")
    problems = validate_history(windowed, for_request=False)
    report.check(problems == [], f"validate_history(result.all_messages(), for_request=False) == {problems}")

    if report.failures:
        print(f"\n{len(report.failures)} check(s) failed:", *report.failures, sep="\n  ")
        return 1
    print("\nAll checks passed.")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
