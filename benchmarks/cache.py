"""The prompt-cache simulator (issue 21): its cost per request against the length of the history, and its
prediction beside the usage a provider reports.

Run from the repository root:

    python benchmarks/cache.py               # 1,000 / 10,000 / 50,000 messages, 200 calls each
    python benchmarks/cache.py --write       # and put the figures in docs/benchmarks.md

(a) `CacheSimulator.add` on a history that grew by 2 messages since the previous request (the middleware calls it
on every request), alternated call by call with `count_tokens_approximately` on the same grown history: a peer
with the same O(new messages) work (the `HistoryCursor` check and the new messages measured) and no cache. Both
run in one process, interleaved, so the shared machine's load falls on both alike.

(b) Prediction and reality: sessions whose responses carry provider usage (`RequestUsage` with
`cache_read_tokens` / `cache_write_tokens`), replayed through the simulator with the same token counts, the
prediction printed beside the provider's figures. Offline there is no provider to ask: the usage is the one the
providers publish for their examples (Anthropic's prompt-caching guide, OpenAI's 128-token steps).
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import Timing, build_history, fmt_time, write_section
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.usage import RequestUsage

from summarization_pydantic_ai import count_tokens_approximately
from summarization_pydantic_ai.cache import (
    AnthropicPromptCache,
    CacheSimulator,
    CacheTokens,
    OpenAIPromptCache,
    PromptCache,
    SentRequest,
    cache_prices,
)

SIZES = (1_000, 10_000, 50_000)
CALLS = 200
PAGE = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def throughput(size: int, calls: int) -> tuple[Timing, Timing]:
    history, stream = build_history(size)
    simulator = CacheSimulator.for_model("anthropic:claude-sonnet-4-5")
    start = datetime(2026, 12, 2, tzinfo=UTC)
    simulator.add(SentRequest(list(history), timestamp=start))
    count_tokens_approximately(history)
    sim_times: list[float] = []
    peer_times: list[float] = []
    gc.disable()
    try:
        for call in range(calls):
            history = [*history, next(stream), next(stream)]  # what pydantic-ai hands over: a new list
            request = SentRequest(history, timestamp=start + timedelta(seconds=call + 1))
            sides = [(simulator.add, request, sim_times), (count_tokens_approximately, history, peer_times)]
            for run, argument, times in sides[::-1] if call % 2 else sides:  # alternate which side goes first
                began = time.perf_counter()
                run(argument)
                times.append(time.perf_counter() - began)
    finally:
        gc.enable()
    return Timing(sim_times), Timing(peer_times)


def _sized(text: str, tokens: int) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(f"{text}|{tokens}")])


def _tokens(message: ModelMessage) -> int:
    return sum(int(str(getattr(p, "content", "")).rpartition("|")[2] or 0) for p in message.parts)


def _head(text: str) -> int:
    tail = text.rpartition("|")[2]
    return int(tail) if tail.isdigit() else 0


def side_by_side() -> list[list[str]]:
    """(session, request, provider read / write / uncached, predicted read / write / uncached)."""
    sessions: list[tuple[str, PromptCache, str, list[tuple[SentRequest, RequestUsage]]]] = []
    book = "Pride and Prejudice|188086"
    anthropic = [
        (SentRequest([_sized("Analyze the major themes", 21)], instructions=book), (188086, 0, 21)),
        (SentRequest([_sized("Analyze the characters", 21)], instructions=book), (0, 188086, 21)),
    ]
    sessions.append(
        (
            "Anthropic guide: a book in the cached system prompt",
            AnthropicPromptCache(model="claude-opus-4", cache_messages=False, cache_instructions=True),
            "anthropic:claude-opus-4-0",
            [
                (r, RequestUsage(input_tokens=w + c + u, cache_write_tokens=w, cache_read_tokens=c))
                for r, (w, c, u) in anthropic
            ],
        )
    )
    document = _sized("contract", 1500)
    openai = [
        (SentRequest([document, _sized("q1", 10)], instructions=""), (0, 1510)),
        (SentRequest([document, _sized("q2", 10)], instructions=""), (1408, 102)),
    ]
    sessions.append(
        (
            "OpenAI: a 1,500-token document, hits in 128-token steps",
            OpenAIPromptCache(),
            "openai:gpt-4.1",
            [(r, RequestUsage(input_tokens=c + u, cache_read_tokens=c)) for r, (c, u) in openai],
        )
    )
    rows: list[list[str]] = []
    for name, cache, model, requests in sessions:
        simulator = CacheSimulator(cache, cache_prices(model), message_tokens=_tokens, text_tokens=_head)
        for number, (request, usage) in enumerate(requests, 1):
            result = simulator.add(SentRequest(**{**request.__dict__, "usage": usage}))
            reported, predicted = result.reported, result.predicted
            assert reported is not None
            same = "yes" if reported == predicted else "no"
            rows.append([name if number == 1 else "", str(number), _split(reported), _split(predicted), same])
    return rows


def _split(tokens: CacheTokens) -> str:
    return f"{tokens.cache_read_tokens:,} / {tokens.cache_write_tokens:,} / {tokens.uncached_tokens:,}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--write", action="store_true", help="put the figures in docs/benchmarks.md")
    args = parser.parse_args()
    lines = [
        "## Prompt-cache simulator per request (issue 21)",
        "",
        "`CacheSimulator.add` on a history that grew by 2 messages since the previous request (what",
        "`CostTrackingMiddleware` does on every request), alternated call by call with `count_tokens_approximately` on",
        "the same grown history (a peer doing the same O(new messages) work without a cache): `benchmarks/cache.py`.",
        "",
        "| History | `add` median | p90 | peer median | `add` / peer |",
        "|---:|---:|---:|---:|---:|",
    ]
    medians: dict[int, float] = {}
    for size in SIZES:
        sim, peer = throughput(size, args.calls)
        medians[size] = sim.median
        lines.append(
            f"| {size:,} | {fmt_time(sim.median)} | {fmt_time(sim.p90)} | {fmt_time(peer.median)} "
            f"| {sim.median / peer.median:.2f} |"
        )
        print(lines[-1], flush=True)
    ratio = medians[SIZES[1]] / medians[SIZES[0]]
    load = os.getloadavg()[0]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines += [
        "",
        f"Per-call cost at 10,000 over 1,000 messages: {ratio:.2f} (O(new messages): the history's length does not",
        "show). Each call checks the history by identity (`HistoryCursor`), fingerprints and counts the 2 new",
        "messages, looks the prefix up in the simulated cache (walking back from the last breakpoint to the first",
        "live entry) and prices the request with genai-prices.",
        f"{args.calls} calls per size (garbage collector paused); measured {stamp}, load average (1 min) {load:.1f}",
        "on 2 cores.",
        "",
        "Prediction beside the provider's usage (read / written / uncached tokens), replaying sessions whose",
        "responses carry `RequestUsage` with the same token counts. Offline there is no provider to ask: the usage",
        "is what the providers publish for their examples.",
        "",
        "| Session | Request | Provider | Simulator | Same |",
        "|---|---:|---:|---:|:-:|",
        *("| " + " | ".join(row) + " |" for row in side_by_side()),
    ]
    print("\n".join(lines[-12:]))
    if args.write:
        write_section(PAGE, "cache-simulator", lines)


if __name__ == "__main__":
    main()
