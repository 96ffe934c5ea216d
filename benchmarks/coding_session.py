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
("head": the instructions or tools changed, e.g. the todo list in the instructions). The section also carries the
table as it was before the cost policy (`_coding_before.py`) and compares the two in dollars.
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

from _coding_before import BEFORE_COMMIT, BEFORE_ROWS, BEFORE_USD, BeforeRow
from _common import write_section

from pydantic_deep.evals import CodingSession, CodingSessionResult
from pydantic_deep.todos import TodoCapability
from summarization_pydantic_ai import STRATEGIES, ContextConfig
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


NONE = "none (no context management)"
COMPRESSION = "compression only (`medium`)"
DEFAULT = "default stack (eviction + middleware)"
TODO_IN_INSTRUCTIONS = "none, todo list in the instructions (as on c218657)"


def configurations(session: CodingSession) -> list[tuple[str, dict[str, Any]]]:
    """Each configuration as `create_deep_agent` keyword arguments (the session supplies model and tools)."""
    off: dict[str, Any] = {"eviction": False, "context_manager": False, "cost_tracking": False}
    found: list[tuple[str, dict[str, Any]]] = [
        (NONE, off),
        (COMPRESSION, {**off, "capabilities": [MessageCompressor(level="medium")]}),
        (DEFAULT, {"max_tokens": WINDOW}),  # the window the scripted model does not declare
    ]
    for strategy in STRATEGIES:
        config = ContextConfig(strategy, max_tokens=WINDOW, checkpoint_phases=session.phases)  # type: ignore[arg-type]
        found.append((f"`{strategy}`", {"context": config}))
    # Diagnostic: the former todo tools, the list written into the instructions (each update rewrites the head).
    former = [TodoCapability(show_in_instructions=True)]
    found.append((TODO_IN_INSTRUCTIONS, {**off, "todos": False, "capabilities": former}))
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


_HEADER = [
    "| Configuration | Requests (summaries) | Tokens sent | vs none | Largest request "
    "| Cost vs none: Anthropic | Anthropic automatic | OpenAI | Cache-read share | Prefix rewrites /100 (head) "
    "| Histories valid | Probes: request, todos, test result |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
]


def render(rows: list[Row]) -> str:
    base = rows[0]
    base_tokens = base.priced["anthropic"].report.input_tokens
    lines = list(_HEADER)
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


def render_before() -> str:
    return "\n".join([*_HEADER, *(f"| {' | '.join(cells)} |" for cells in BEFORE_ROWS)])


def _mid_per_100(rewrites: int, head: int, requests: int) -> float:
    return 100 * (rewrites - head) / requests


def compare(rows: list[Row]) -> str:
    """Each configuration's dollars now against the same configuration before the cost policy."""
    old_none, new_none = BEFORE_USD[NONE][0], _usd(rows[0])
    lines = [
        "| Configuration | Anthropic: before | now | now / before | vs c218657's none: before | now "
        "| vs today's none | Mid-history rewrites /100: before | now | OpenAI: before | now |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        before = _before(row)
        if before is None:
            continue
        now = _usd(row)
        lines.append(
            f"| {row.name} | ${before[0]:.2f} | ${now:.2f} | {now / before[0]:.2f}x | {before[0] / old_none:.1%} "
            f"| {now / old_none:.1%} | {now / new_none:.1%} | {_mid_per_100(*before[3:]):.1f} | {_mid(row):.1f} "
            f"| ${before[2]:.2f} | ${_usd(row, 'openai'):.2f} |"
        )
    return "\n".join(lines)


def _before(row: Row) -> BeforeRow | None:
    """The row's figures before; the diagnostic is set against the unmanaged session it reproduces."""
    return BEFORE_USD.get(NONE if row.name == TODO_IN_INSTRUCTIONS else row.name)


def _mid(row: Row) -> float:
    anthropic = row.priced["anthropic"]
    return _mid_per_100(anthropic.report.rewrites, anthropic.head_rewrites, anthropic.report.requests)


def _usd(row: Row, cache: str = "anthropic") -> float:
    cost = row.priced[cache].report.cost_usd
    return float(cost) if cost is not None else float("nan")


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
"head": its instructions or tool definitions changed; a row's mid-history rewrites are its rewrites minus its head
rewrites. The probes look at the session's last request: does it hold the latest user request verbatim, the
current todo list, the last test result? The default stack is `create_deep_agent(max_tokens=32_000)` (the scripted
model declares no window). The last row is a diagnostic: the todo list written into the instructions, as it was
on c218657 (`TodoCapability(show_in_instructions=True)`), without context management.
"""


_BEFORE_INTRO = """\
Before the cost policy ({commit}, context management as on c218657; the todo list then lived in the
instructions, so every update re-wrote the whole cached prompt, and "none" paid for it):
"""


def findings(rows: list[Row]) -> str:
    """The acceptance figures of issue 21, computed from the rows (they stay true when the table is regenerated)."""
    by_name = {row.name: row for row in rows}
    none, former = by_name[NONE], by_name[TODO_IN_INSTRUCTIONS]
    presets = [row for row in rows if row.name.startswith("`")]
    ratios = [_usd(row) / BEFORE_USD[row.name][0] for row in presets]
    larger = [row.name for row in presets if _usd(row) / _usd(none) > BEFORE_USD[row.name][0] / BEFORE_USD[NONE][0]]
    mids = {row.name: _mid(row) for row in rows}
    worst = max((row.name for row in [*presets, by_name[DEFAULT]]), key=lambda name: mids[name])
    compared = [row for row in rows if row.name in BEFORE_USD]
    cheaper_openai = [row for row in compared if _usd(row, "openai") <= BEFORE_USD[row.name][2]]
    compression = 1 - _usd(by_name[COMPRESSION]) / _usd(none)
    return (
        f"Reading it: every preset costs {min(ratios):.2f}-{max(ratios):.2f}x its own dollars before the cost policy "
        f"(Anthropic message prefix; the default stack {_usd(by_name[DEFAULT]) / BEFORE_USD[DEFAULT][0]:.2f}x). "
        f"The unmanaged session itself costs {_usd(none) / BEFORE_USD[NONE][0]:.0%} of what it did (the todo list "
        f"left the instructions; with it there again, {_usd(former) / BEFORE_USD[NONE][0]:.0%}), so against today's "
        f"unmanaged session {len(larger)} of {len(presets)} presets take a larger share than before "
        f"({', '.join(larger) or 'none'}) although each costs less: both columns are in the comparison. Compression "
        f"alone saves {compression:.0%} of the unmanaged cost. The most mid-history rewrites: {worst}, "
        f"{mids[worst]:.1f} per 100 requests. With the OpenAI model {len(cheaper_openai)} of {len(compared)} "
        "configurations cost at most what they did."
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
        _BEFORE_INTRO.format(commit=BEFORE_COMMIT),
        render_before(),
        "",
        "In dollars, each configuration against itself before:",
        "",
        compare(rows),
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
