"""`MessageCompressor`: which tool returns it compresses (by tool name and size, at each level), what it never
touches (user prompts, the latest tool exchange, marked parts), the marks it leaves, its events, its cache, and a
browser-agent run end to end through `Agent.run` with a scripted `FunctionModel`."""

from __future__ import annotations

from typing import Any

import pydantic_ai.models
import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from test_compressors import console_log, deep_aria_tree
from test_previews import api_json

from summarization_pydantic_ai import ContextEvent, ToolResultsCompressed, validate_history
from summarization_pydantic_ai.compression import COMPRESSED_METADATA_KEY, LEVELS, MessageCompressor

pydantic_ai.models.ALLOW_MODEL_REQUESTS = False

SNAPSHOT = deep_aria_tree()[0]
LOG = console_log()[0]
JSON = api_json()
PROSE = "\n".join(f"Paragraph {i}: nothing structured here, just words and more words." for i in range(600))


def exchange(i: int, tool: str, content: Any) -> list[ModelMessage]:
    call = ToolCallPart(tool, {"step": i}, f"c{i}")
    return [ModelResponse(parts=[call]), ModelRequest(parts=[ToolReturnPart(tool, content, f"c{i}")])]


def history(*tools: tuple[str, Any], prompt: str = "Buy the cheapest shoe.") -> list[ModelMessage]:
    messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(prompt)])]
    for i, (tool, content) in enumerate(tools):
        messages += exchange(i, tool, content)
    return messages


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


async def test_routes_by_tool_name_and_size_and_marks_what_it_compressed() -> None:
    messages = history(
        ("browser_snapshot", SNAPSHOT),
        ("browser_console_messages", LOG),
        ("fetch_api", JSON),
        ("read_notes", PROSE),
        ("small_tool", "ok"),
        ("browser_snapshot", SNAPSHOT),  # the latest exchange: compressed as it enters, like every new output
    )
    out = await MessageCompressor(level="medium")(messages)
    assert validate_history(out) == []
    snapshot, log, api, prose, small, latest = returns(out)
    assert snapshot.content.startswith("[compressed snapshot (Playwright aria), depth 6: ")
    assert log.content.startswith("[compressed log: 5,000 → ")
    assert api.content.startswith("[compressed JSON: ")
    assert "[... output truncated: kept" in prose.content and len(prose.content) < len(PROSE)
    assert small.content == "ok" and latest.content == snapshot.content
    for part, kind in ((snapshot, "snapshot"), (log, "log"), (api, "json"), (prose, "text")):
        mark = part.metadata[COMPRESSED_METADATA_KEY]  # type: ignore[index]
        assert mark["kind"] == kind and mark["level"] == "medium"
        assert mark["chars_after"] == len(part.content) < mark["chars_before"]
    assert [p.tool_call_id for p in returns(out)] == [p.tool_call_id for p in returns(messages)]
    assert out[0] is messages[0]  # the user prompt: the same object


async def test_levels_differ_in_what_they_compress_and_how_hard() -> None:
    messages = history(("browser_snapshot", SNAPSHOT), ("read_notes", PROSE), ("done", "x"))
    sizes: dict[str, list[int]] = {}
    for level in LEVELS:
        out = await MessageCompressor(level=level)(messages)
        sizes[level] = [len(p.content) for p in returns(out)]
    assert sizes["none"] == [len(SNAPSHOT), len(PROSE), 1]
    assert sizes["high"][0] < sizes["medium"][0] < sizes["low"][0] < len(SNAPSHOT)
    assert sizes["high"][1] < sizes["medium"][1] < sizes["low"][1] < len(PROSE)
    short = history(("read_notes", PROSE[:20_000]), ("done", "x"))  # below low's 32,000 chars, above medium's
    assert next(len(p.content) for p in returns(await MessageCompressor(level="low")(short))) == 20_000
    assert next(len(p.content) for p in returns(await MessageCompressor(level="medium")(short))) < 20_000


async def test_snapshot_depth_overrides_the_level() -> None:
    messages = history(("take_snapshot", SNAPSHOT), ("done", "x"))
    (part, _) = returns(await MessageCompressor(level="low", snapshot_depth=2)(messages))
    assert part.content.startswith("[compressed snapshot (Playwright aria), depth 2: ")


async def test_tool_patterns_are_configurable_and_excluded_tools_are_left_alone() -> None:
    messages = history(("my_page_dump", SNAPSHOT), ("audit_trail", LOG), ("done", "x"))
    compressor = MessageCompressor(snapshot_tools=("my_page_*",), exclude_tools=("audit_*",))
    page, audit, _ = returns(await compressor(messages))
    assert page.content.startswith("[compressed snapshot")
    assert audit.content == LOG
    with pytest.raises(TypeError, match="not a string"):
        MessageCompressor(snapshot_tools="browser_snapshot")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="level must be one of none, low, medium, high"):
        MessageCompressor(level="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="snapshot_depth"):
        MessageCompressor(snapshot_depth=0)


async def test_structured_returns_are_compressed_as_json_and_others_pass() -> None:
    import json

    data = json.loads(JSON)
    messages = history(("fetch_api", data), ("picture", object()), ("done", "x"))
    api, other, _ = returns(await MessageCompressor()(messages))
    assert api.content.startswith("[compressed JSON: ")
    assert other.content is returns(messages)[1].content


async def test_idempotent_deterministic_and_marked_parts_are_never_compressed_again() -> None:
    messages = history(("browser_snapshot", SNAPSHOT), ("bash", LOG), ("done", "x"))
    compressor = MessageCompressor(level="high")
    once = await compressor(messages)
    assert await compressor(once) is once  # unchanged: the very same list back
    assert [p.content for p in returns(await MessageCompressor(level="high")(once))] == [
        p.content for p in returns(once)
    ]
    assert [p.content for p in returns(await MessageCompressor(level="high")(messages))] == [
        p.content for p in returns(once)
    ]
    cleared = ToolReturnPart("bash", LOG, "z", metadata={"summarization_pydantic_ai.cleared": {"tokens": 9}})
    marked = [*messages[:-1], ModelRequest(parts=[cleared]), *exchange(9, "done", "x")]
    assert returns(await MessageCompressor()(marked))[-2].content == LOG


async def test_a_new_output_is_compressed_as_it_enters_and_never_rewritten_later() -> None:
    """The prompt cache: an output compressed one request after it was sent rewrites the cached prefix from that
    output on; compressed as it enters, the prefix the next request reads back is unchanged."""
    compressor = MessageCompressor()
    messages = history(("browser_snapshot", SNAPSHOT))
    first = await compressor(messages)
    assert returns(first)[0].content.startswith("[compressed snapshot")  # the newest output, compressed at once
    grown = [*first, *exchange(1, "click", "clicked")]
    second = await compressor(grown)
    assert all(a is b for a, b in zip(second[: len(first)], first, strict=True))  # the previous request's, unchanged
    assert returns(second)[1].content == "clicked"


async def test_protect_latest_keeps_the_latest_exchange_whole_until_a_newer_one_exists() -> None:
    compressor = MessageCompressor(protect_latest=True)
    messages = history(("browser_snapshot", SNAPSHOT))
    first = await compressor(messages)
    assert first is messages  # the only exchange is the latest
    grown = [*first, *exchange(1, "click", "clicked")]
    second = await compressor(grown)
    assert returns(second)[0].content.startswith("[compressed snapshot")
    assert returns(second)[1].content == "clicked"


async def test_an_unchanged_history_is_served_from_the_cache() -> None:
    compressor = MessageCompressor()
    messages = history(*[("browser_snapshot", SNAPSHOT)] * 5, ("done", "x"))
    out = await compressor(messages)
    again = await compressor(list(messages))  # the caller's originals again (plain ProcessHistory)
    assert [m is n for m, n in zip(out, again, strict=True)] == [True] * len(out)
    assert await compressor(out) is out  # the output again (capability form writes it back)


async def test_events_report_what_was_compressed() -> None:
    events: list[ContextEvent] = []
    messages = history(("browser_snapshot", SNAPSHOT), ("bash", LOG), ("done", "x"))
    await MessageCompressor(event_callback=events.append)(messages)
    (event,) = events
    assert isinstance(event, ToolResultsCompressed)
    assert event.compressed == 2 and event.tool_call_ids == ("c0", "c1")
    assert event.chars_before == len(SNAPSHOT) + len(LOG) and 0.5 < event.reduction < 1


async def test_a_browser_agent_run_sends_every_snapshot_compressed_and_each_request_extends_the_last() -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < 4:
            return ModelResponse(parts=[ToolCallPart("browser_snapshot", {}, f"s{step}")])
        return ModelResponse(parts=[TextPart("Bought shoe model 0.")])

    agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(MessageCompressor(level="high"))])

    @agent.tool_plain
    def browser_snapshot() -> str:
        return SNAPSHOT

    result = await agent.run("Buy the cheapest shoe.")
    assert result.output == "Bought shoe model 0."
    for previous, messages in zip([[], *seen[:-1]], seen, strict=True):
        assert validate_history(messages) == []
        assert all(p.content.startswith("[compressed snapshot") for p in returns(messages))
        assert messages[0].parts[0].content == "Buy the cheapest shoe."  # type: ignore[union-attr]
        assert messages[: len(previous)] == previous  # no request rewrites what the one before it sent
    assert len(seen) == 5


def test_for_run_gives_a_fresh_cache() -> None:
    import asyncio

    compressor = MessageCompressor(level="low")
    fresh = asyncio.run(compressor.for_run(None))  # type: ignore[arg-type]
    assert isinstance(fresh, MessageCompressor) and fresh is not compressor
    assert fresh.level == "low"
