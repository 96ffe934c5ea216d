"""Cost with the prompt cache counted: a 167-request coding session through `create_deep_agent`, per context
configuration (issue 21).

Run from the repository root:

    python benchmarks/coding_session.py              # print the table and write it into docs/benchmarks.md
    python benchmarks/coding_session.py --no-write   # print only
    python benchmarks/coding_session.py --runs 2     # the first 2 of the 6 user requests (a quick look)

The session (`pydantic_deep.evals.CodingSession`) is deterministic: file reads (several read again, some after
an edit), greps with many matches, whole-suite test logs of ~2,400 lines, edits, writes, todo updates, two long
fetched documents delivered as user text, tool errors, six user requests carrying the history, and an imported
history whose parallel results are out of order. Its model records every request it receives (summary requests
too); each configuration's requests are then priced with `summarization_pydantic_ai.cache.CacheSimulator`:

- Anthropic, message prefix: the next request reads back the longest identical prefix (message by message) of
  an earlier one at 0.1x and writes the rest at 1.25x (claude-sonnet-4-5 prices; no minimum, no expiry, no
  lookback limit: the idealized model issue 21's tables use);
- Anthropic, automatic: pydantic-ai's `anthropic_cache` breakpoint on the last message only, Anthropic's
  20-block lookback, 5-minute TTL and 1,024-token minimum (what a real session on that setting pays);
- OpenAI: automatic prefix caching from 1,024 tokens in 128-token steps, reads at 0.5x, no write premium (gpt-4o).

Costs include the output tokens (the same in every configuration except the summaries) and are relative to the
unmanaged session. A prefix rewrite is a request that does not start with everything the previous one sent
("head": the instructions or tools changed, e.g. the todo list in the instructions).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from _common import write_section

from pydantic_deep.agent import session_messages_path
from pydantic_deep.evals import CodingSession, CodingSessionResult
from pydantic_deep.todos import todo_toolset
from summarization_pydantic_ai import STRATEGIES, ContextConfig, ContextManagerMiddleware
from summarization_pydantic_ai.cache import (
    AnthropicPromptCache,
    CacheReport,
    CacheSimulator,
    PromptCache,
    cache_prices,
    prompt_cache_for,
)
from summarization_pydantic_ai.compression import MessageCompressor

PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
WINDOW = 32_000
ANTHROPIC = "anthropic:claude-sonnet-4-5"
OPENAI = "openai:gpt-4o"


@dataclass(frozen=True)
class MessagePrefixCache(AnthropicPromptCache):
    """Anthropic's prices with an entry at every message boundary, no lookback limit, no minimum, no expiry:
    a request reads the longest identical prefix of an earlier one, message by message."""

    lookback_blocks: int | None = None
    min_cacheable_tokens: int = 0
    retention: timedelta | None = None

    def write_points(self, layout: Any) -> list[tuple[int, Any]]:
        return [(position, None) for position in range(layout.last + 1)]

    def read_points(self, layout: Any) -> list[int]:
        return [layout.last] if layout.cum_tokens else []


CACHES: dict[str, tuple[Callable[[], PromptCache], str]] = {
    "anthropic": (lambda: MessagePrefixCache(model="claude-sonnet-4-5"), ANTHROPIC),
    "anthropic_auto": (lambda: prompt_cache_for(ANTHROPIC), ANTHROPIC),
    "openai": (lambda: prompt_cache_for(OPENAI), OPENAI),
}


@dataclass(frozen=True)
class Priced:
    report: CacheReport
    head_rewrites: int
    """Rewrites where the instructions or tool definitions changed."""


@dataclass(frozen=True)
class Row:
    name: str
    result: CodingSessionResult
    seconds: float
    priced: dict[str, Priced]
    valid: bool


def configurations(session: CodingSession) -> list[tuple[str, dict[str, Any]]]:
    """Each configuration as `create_deep_agent` keyword arguments (the session supplies model and tools)."""
    off: dict[str, Any] = {"eviction": False, "context_manager": False, "cost_tracking": False}
    default = ContextManagerMiddleware(messages_path=session_messages_path, max_tokens=WINDOW)
    found: list[tuple[str, dict[str, Any]]] = [
        ("none (no context management)", off),
        ("compression only (`medium`)", {**off, "capabilities": [MessageCompressor(level="medium")]}),
        ("default stack (eviction + middleware)", {"context_manager": default}),
    ]
    for strategy in STRATEGIES:
        config = ContextConfig(strategy, max_tokens=WINDOW, checkpoint_phases=session.phases)  # type: ignore[arg-type]
        found.append((f"`{strategy}`", {"context": config}))
    # Diagnostics: the same todo tools, without the list in the instructions (where each update rewrites the head).
    plain_todos: dict[str, Any] = {"todos": False, "toolsets": [todo_toolset()]}
    found.append(("none, todo list not in the instructions", {**off, **plain_todos}))
    default = ContextManagerMiddleware(messages_path=session_messages_path, max_tokens=WINDOW)
    found.append(("default stack, todo list not in the instructions", {"context_manager": default, **plain_todos}))
    return found


def price(result: CodingSessionResult, cache: PromptCache, model: str) -> Priced:
    """Every request the model received, in order (summaries included), through the simulator."""
    simulator = CacheSimulator(cache, cache_prices(model))
    cached = simulator.simulate(request.sent_request(model) for request in result.requests)
    return Priced(CacheReport.of(cached), sum(1 for c in cached if c.changed_at == -1))


async def measure(runs: int) -> list[Row]:
    rows: list[Row] = []
    names = [name for name, _ in configurations(CodingSession(runs=runs))]
    for name in names:
        session = CodingSession(runs=runs)
        kwargs = dict(configurations(session))[name]
        started = time.perf_counter()
        result = await session.run(**kwargs)
        seconds = time.perf_counter() - started
        priced = {key: price(result, make(), model) for key, (make, model) in CACHES.items()}
        rows.append(Row(name, result, seconds, priced, not result.history_problems()))
        print(f"  {name}: {seconds:.1f} s", file=sys.stderr)
    return rows


def _ratio(value: Decimal | None, base: Decimal | None) -> str:
    return "n/a" if value is None or not base else f"{float(value / base):.0%}"


def render(rows: list[Row]) -> str:
    base = rows[0]
    base_tokens = base.priced["anthropic"].report.input_tokens
    lines = [
        "| Configuration | Requests (summaries) | Tokens sent | vs none | Largest request "
        "| Cost vs none: Anthropic | Anthropic automatic | OpenAI | Cache-read share | Prefix rewrites /100 (head) "
        "| Histories valid | Probes: request, todos, test result |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        r, anthropic = row.result, row.priced["anthropic"]
        report = anthropic.report
        cost = {k: _ratio(p.report.cost_usd, base.priced[k].report.cost_usd) for k, p in row.priced.items()}
        per_100 = 100 / report.requests
        probes = " ".join("yes" if ok else "**no**" for ok in r.probes().values())
        lines.append(
            f"| {row.name} | {len(r.turn_requests)} ({r.summary_requests}) | {report.input_tokens / 1e6:.2f}M "
            f"| {report.input_tokens / base_tokens:.0%} | {r.max_request_tokens:,} | {cost['anthropic']} "
            f"| {cost['anthropic_auto']} | {cost['openai']} | {report.cache_read_share:.0%} "
            f"| {report.rewrites * per_100:.0f} ({anthropic.head_rewrites * per_100:.0f}) "
            f"| {'yes' if row.valid else '**NO**'} | {probes} |"
        )
    return "\n".join(lines)


_INTRO = """\
## Coding session: cost with the prompt cache (issue 21)

`benchmarks/coding_session.py` plays `pydantic_deep.evals.CodingSession` through `create_deep_agent` under each
configuration, with a 32,000-token window: six user requests carrying the history, {requests} model requests
of file reads (several read again, some after an edit), greps with many matches, whole-suite test logs of
~2,400 lines (failures, then passes), edits, writes, todo updates, two fetched documents delivered as user text
beside the tool result, tool errors and retries, and an imported history whose parallel results are stored out
of order. Its model records every request it receives, summary requests included; each configuration's
requests are priced with `summarization_pydantic_ai.cache.CacheSimulator`:

- **Anthropic**: the next request reads back the longest identical prefix of an earlier one, message by message,
  at 0.1x and writes the rest at 1.25x (claude-sonnet-4-5 prices; no minimum, expiry or lookback limit: the
  model of issue 21's tables);
- **Anthropic automatic**: what pydantic-ai's `anthropic_cache` setting gets (one breakpoint on the last
  message, Anthropic's 20-block lookback, 5-minute TTL, 1,024-token minimum);
- **OpenAI**: automatic prefix caching from 1,024 tokens in 128-token steps, reads at 0.5x, no write premium
  (gpt-4o prices).

Costs include output tokens and are relative to the unmanaged session; tokens sent count every request
(summaries too). A prefix rewrite is a request that does not start with everything the previous request sent;
"head": its instructions or tool definitions changed (the todo list lives in the instructions, so every
`write_todos` that changes the list is one). The probes look at the session's last request: does it hold the
latest user request verbatim, the current todo list, the last test result? The last two rows are diagnostics:
the same todo tools without the list in the instructions.
"""


def _cost(row: Row, base: Row, cache: str = "anthropic") -> float:
    value, reference = row.priced[cache].report.cost_usd, base.priced[cache].report.cost_usd
    return float(value / reference) if value is not None and reference else float("nan")


def findings(rows: list[Row]) -> str:
    """A few sentences computed from the rows (they stay true when the table is regenerated)."""
    by_name = {row.name: row for row in rows}
    none, plain = by_name["none (no context management)"], by_name["none, todo list not in the instructions"]
    default = by_name["default stack (eviction + middleware)"]
    default_plain = by_name["default stack, todo list not in the instructions"]
    plain_cost = _cost(plain, none)
    rewrites = none.priced["anthropic"]
    return (
        f"Reading it: the unmanaged session makes {rewrites.report.rewrites} prefix rewrites, "
        f"{rewrites.head_rewrites} of them head rewrites (the todo updates). Without the list in the instructions "
        f"the same session costs {plain_cost:.0%} of it on Anthropic: the todo list in the instructions alone "
        f"multiplies the unmanaged bill by {1 / plain_cost:.1f}. Against that baseline the default stack costs "
        f"{_cost(default, plain):.0%}, and {_cost(default_plain, plain):.0%} with the list out of the instructions. "
        "A row's mid-history rewrites are its rewrites minus its head rewrites."
    )


def environment(started: datetime, loads: tuple[str, str], seconds: float, runs: int) -> str:
    return (
        f"Measured {started:%Y-%m-%d %H:%M} UTC on {platform.machine()} ({os.cpu_count()} logical cores, shared), "
        f"Python {platform.python_version()}, load average (1, 5, 15 min) {loads[0]} at the start and {loads[1]} "
        f"at the end; {runs} user requests; the whole script took {seconds:.0f} s. "
        "Regenerate with `python benchmarks/coding_session.py`."
    )


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6, help="user requests to play (1-6; default all 6)")
    parser.add_argument("--no-write", action="store_true", help="print the table, leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    started, load_before, clock = datetime.now(UTC), _load(), time.perf_counter()
    rows = asyncio.run(measure(args.runs))
    elapsed = time.perf_counter() - clock
    requests = len(rows[0].result.turn_requests)
    section = [
        _INTRO.format(requests=requests),
        render(rows),
        "",
        findings(rows),
        "",
        environment(started, (load_before, _load()), elapsed, args.runs),
        "",
    ]
    print("\n".join(section))
    if not args.no_write:
        write_section(PAGE, "coding-session", section)
        print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
