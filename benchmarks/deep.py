"""`EvictionProcessor` (issue 4) and the history search (issue 5) benchmarks; run by `benchmarks/run.py`.

EvictionProcessor: a 1,000-message history holding 10 tool outputs of 100 KB (JSON, log, CSV, plain text) among
    ~490 outputs of 2 KB. The first call evicts the 10 (reported, not a target). Then requests are simulated the
    way a run makes them: the run state (`RunState`) is fresh at the first request, and before every later
    request the history grew by a response and a request (a 2 KB tool output, below the limit). Target: the
    per-request cost when nothing new is evicted (a later request in a run: only the new messages are scanned) is
    under 1 ms (median). Also reported: the first request of a run and the plain form `await processor(messages)`,
    which has no run state and scans the whole history every time, and the `before_model_request` hook timed
    inside real `Agent.run` calls with a scripted `FunctionModel` (a cross-check that pydantic-ai hands the hook
    the same message objects, so the incremental path is taken).
History search: a realistic history of 10,000 messages (~20 MB of messages.json, written with `JsonHistoryStore`):
    user prompts, assistant text, tool calls with ~2 KB outputs, some Chinese and Japanese text, a few summaries.
    Targets: a cold build of the SQLite FTS5 index under 5 s; a query in under 20 ms (median) once the index
    exists; appending 2 messages updates the index in under 2 ms (median).

`python benchmarks/deep.py` prints both sections (quick settings) without writing the page.
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import Timing, build_history, fmt_time, tool_output
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep.backends import StateBackend
from pydantic_deep.eviction import EVICTION_METADATA_KEY, EvictionProcessor
from pydantic_deep.history_search import HistoryArchiveSearch, SessionIndex, build_fts_query
from summarization_pydantic_ai import SUMMARY_METADATA_KEY, JsonHistoryStore, ensure_message_id

# -- EvictionProcessor -----------------------------------------------------------------------------------------------

EVICT_SIZE = 1_000
BIG_OUTPUTS = 10
BIG_CHARS = 100_000
TARGET_EVICT_S = 1e-3
REQUESTS_PER_RUN = 10
"""Requests after the first in one simulated run (the history then goes back to its 1,000 messages)."""
AGENT_RUNS = 20
AGENT_RUNS_QUICK = 5


def new_run_state() -> Any:
    """A fresh run state of `EvictionProcessor` (what `for_run` gives each run). Its own module since it moved
    out of `_processor.py`, where older checkouts (compared by `ab_compare.py`) keep a private `_RunState`."""
    try:
        from pydantic_deep.eviction._run_state import RunState
    except ImportError:
        from pydantic_deep.eviction._processor import _RunState as RunState  # type: ignore[attr-defined,no-redef]
    return RunState()


def big_output(kind: str, seed: int) -> str:
    """About `BIG_CHARS` characters of a JSON document, a log, a CSV table or plain text."""
    rng = random.Random(seed)
    if kind == "json":
        items: list[dict[str, Any]] = []
        text = ""
        while len(text) < BIG_CHARS:
            items += [
                {
                    "id": len(items) + k,
                    "name": f"item-{seed}-{len(items) + k}",
                    "status": rng.choice(["active", "pending", "failed"]),
                    "score": round(rng.random(), 4),
                    "tags": rng.sample(["alpha", "beta", "gamma", "delta", "eps"], 2),
                }
                for k in range(200)
            ]
            text = json.dumps({"total": len(items), "page": 1, "items": items})
        return text[: text.rfind("},") + 1] + "]}"
    lines: list[str] = []
    size = 0
    n = 0
    while size < BIG_CHARS:
        n += 1
        if kind == "log":
            level = "ERROR" if n % 97 == 0 else rng.choice(["INFO", "INFO", "DEBUG", "WARN"])
            stamp = f"2026-01-05T10:{n // 60 % 60:02d}:{n % 60:02d}Z"
            line = f"{stamp} {level} worker-{n % 8} request {n} done in {rng.randint(1, 900)} ms"
        elif kind == "csv":
            line = (
                "id,name,region,amount,created"
                if n == 1
                else f"{n},customer {n},eu-{n % 5},{rng.randint(1, 10**6) / 100},2026-01-{n % 28 + 1:02d}"
            )
        else:
            line = f"Line {n}: the build step {n % 40} reported {rng.randint(0, 99)} warnings while linking module_{n}."
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def eviction_history() -> tuple[list[ModelMessage], Iterator[ModelMessage]]:
    """`EVICT_SIZE` messages (the last a text answer) whose 10 evenly spread tool outputs are 100 KB each."""
    history, stream = build_history(EVICT_SIZE - 1)
    returns = [
        i for i, m in enumerate(history) if isinstance(m, ModelRequest) and isinstance(m.parts[0], ToolReturnPart)
    ]
    step = len(returns) // BIG_OUTPUTS
    kinds = ["json", "log", "csv", "text"]
    for k in range(BIG_OUTPUTS):
        i = returns[k * step + step // 2]
        part = history[i].parts[0]
        assert isinstance(part, ToolReturnPart)
        content = big_output(kinds[k % len(kinds)], k)
        history[i] = ModelRequest(parts=[ToolReturnPart(part.tool_name, content, tool_call_id=part.tool_call_id)])
    assert isinstance(history[-1], ModelResponse) and isinstance(history[-1].parts[0], TextPart)
    return history, stream


@dataclass
class EvictionResult:
    cold_s: float
    """The first call on the loaded history: it evicts the 10 outputs of 100 KB."""
    evicted: int
    per_request: Timing
    """A later request of a run: `_process` with the run's state, the history grew by 2 messages."""
    first_request: Timing
    """The first request of a run (fresh run state: every message is scanned)."""
    plain: Timing
    """`await processor(messages)` (no run state: every message is scanned), on the same histories."""
    agent_later: Timing
    """`before_model_request` inside `Agent.run`, requests after the first."""
    agent_first: Timing
    """`before_model_request` inside `Agent.run`, the first request of each run."""
    agent_incremental: int
    """Later requests in `Agent.run` that took the incremental path."""
    agent_later_count: int
    history_chars: int

    @property
    def ok(self) -> bool:
        return self.per_request.median < TARGET_EVICT_S


@dataclass
class _TimedEviction(EvictionProcessor):
    """Times its own `before_model_request` and notes whether the run state let it scan only new messages."""

    samples: list[tuple[int, float, bool]] = field(default_factory=list[tuple[int, float, bool]])
    """(request number in the run, seconds, incremental). Shared by the per-run copies (`for_run`)."""
    _request: int = 0

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages = request_context.messages
        state = self._run
        incremental = bool(state is not None and len(state.cursor) and state.cursor.peek(messages).is_append_only)
        start = time.perf_counter()
        result = await super().before_model_request(ctx, request_context)
        elapsed = time.perf_counter() - start
        self.samples.append((self._request, elapsed, incremental))
        self._request += 1
        return result


async def _agent_runs(history: list[ModelMessage], backend: StateBackend, runs: int) -> list[tuple[int, float, bool]]:
    """`runs` agent runs on `history`, each making `REQUESTS_PER_RUN` tool calls (2 KB outputs) and an answer."""

    steps = {"n": 0}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        steps["n"] += 1
        if steps["n"] <= REQUESTS_PER_RUN:
            call = ToolCallPart("read_file", {"path": f"src/module_{steps['n']}.py"}, tool_call_id=f"run_{steps['n']}")
            return ModelResponse(parts=[TextPart("Reading the next module."), call])
        return ModelResponse(parts=[TextPart("Done.")])

    processor = _TimedEviction(backend=backend)
    agent = Agent(FunctionModel(model), capabilities=[processor])

    @agent.tool_plain
    def read_file(path: str) -> str:  # pyright: ignore[reportUnusedFunction]
        return tool_output(int(path.removeprefix("src/module_").removesuffix(".py")))

    samples: list[tuple[int, float, bool]] = []
    for _ in range(runs):
        steps["n"] = 0
        processor.samples.clear()
        gc.collect()
        gc.disable()
        try:
            await agent.run("Read the next modules and report.", message_history=history)
        finally:
            gc.enable()
        samples += processor.samples
    return samples


async def run_eviction(iterations: int, *, quick: bool = False) -> EvictionResult:
    history, stream = eviction_history()
    backend = StateBackend()
    processor = EvictionProcessor(backend=backend)
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        evicted_history = await processor(history)
        cold = time.perf_counter() - start
    finally:
        gc.enable()
    evicted = sum(
        isinstance(p, ToolReturnPart) and EVICTION_METADATA_KEY in (p.metadata or {})
        for m in evicted_history
        for p in m.parts
    )
    history = list(evicted_history)
    base = len(history)
    per_request: list[float] = []
    first: list[float] = []
    plain: list[float] = []
    gc.collect()
    gc.disable()
    try:
        while len(per_request) < iterations:
            del history[base:]
            state = new_run_state()
            start = time.perf_counter()
            result = await processor._process(history, state, None)  # pyright: ignore[reportPrivateUsage]
            first.append(time.perf_counter() - start)
            assert result is history
            for _ in range(min(REQUESTS_PER_RUN, iterations - len(per_request))):
                history += [next(stream), next(stream)]
                start = time.perf_counter()
                result = await processor._process(history, state, None)  # pyright: ignore[reportPrivateUsage]
                per_request.append(time.perf_counter() - start)
                assert result is history  # nothing new evicted
                start = time.perf_counter()
                await processor(history)
                plain.append(time.perf_counter() - start)
    finally:
        gc.enable()
    del history[base:]
    agent_samples = await _agent_runs(history, backend, AGENT_RUNS_QUICK if quick else AGENT_RUNS)
    later = [s for s in agent_samples if s[0] > 0]
    return EvictionResult(
        cold_s=cold,
        evicted=evicted,
        per_request=Timing(per_request),
        first_request=Timing(first),
        plain=Timing(plain),
        agent_later=Timing([s[1] for s in later]),
        agent_first=Timing([s[1] for s in agent_samples if s[0] == 0]),
        agent_incremental=sum(s[2] for s in later),
        agent_later_count=len(later),
        history_chars=sum(len(str(p.content)) for m in history for p in m.parts if isinstance(p, ToolReturnPart)),
    )


# -- History search: the data ------------------------------------------------------------------------------------------

SEARCH_SIZE = 10_000
TARGET_QUERY_S = 20e-3
TARGET_UPDATE_S = 2e-3
TARGET_BUILD_S = 5.0
QUERY_ROUNDS = 6
QUERY_ROUNDS_QUICK = 2
BUILD_REPEATS = 3
BUILD_REPEATS_QUICK = 1
UPDATE_ITERATIONS = 200
SUMMARY_EVERY = 2_500
EPOCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

_PROSE_TEXT = """
the a to of and in is for that this it with on be we as not are can from file function test error value
should will if by at or but when all then there so have it's run now call check need first also one new
data config code change fix case line return result request response module service handler cache
database query index table row column user session token limit retry timeout connection pool worker queue
job task step build deploy release version branch commit merge review patch update upgrade install package
dependency import export parse format encode decode read write open close lock unlock thread process memory
disk network socket server client api endpoint route middleware logger logging metric trace span event
state store load save snapshot backup restore migrate migration schema field model type class method object
list dict map set key item entry record batch stream buffer chunk page offset cursor filter sort search
match pattern regex path directory folder name id hash checksum signature header body payload json yaml
csv xml html markdown text string number integer float boolean null empty missing invalid valid expected
actual failed passed skipped flaky slow fast latency throughput benchmark profile optimize refactor rename
remove delete add insert create extend wrap unwrap handle raise catch throw exception warning info debug
trace stack frame line column offset position range window interval schedule cron timer clock timezone
utc date time duration seconds minutes hours days week month year production staging development local
remote container docker kubernetes pod node cluster region zone replica shard partition leader follower
vote election heartbeat health probe readiness liveness restart crash panic abort signal interrupt cancel
"""
_PROSE = _PROSE_TEXT.split()
_RARE_FACTS = [
    "The staging database password rotates every Thursday at 04:00 through the kestrel-rotator job.",
    "Customer ticket ZX-40417 was caused by the off-by-one in paginate_cursor when the page was empty.",
    "We decided to pin libfrobnicate to 2.3.9 because 2.4.0 breaks the quaternion serializer.",
    "The flamingo feature flag must stay off in eu-west until the GDPR review by Marguerite is done.",
    "Latency regression traced to the xylograph renderer allocating a new arena per request.",
    "Backups for the ledger shard live in bucket s3://ops-archive-9c1f/ledger and expire after 35 days.",
    "The nightly job octarine-sync fails when the upstream returns HTTP 429 without a Retry-After header.",
    "Alice prefers tabs in Makefiles only; everything else in the repository uses four spaces.",
]
_CJK_USER = [
    "请检查数据库连接池的配置文件，为什么在高负载下会超时？",
    "部署到生产环境之前，先运行所有的单元测试和集成测试。",
    "重试逻辑有问题：失败以后没有记录错误日志。",
    "エラーが発生しました。設定ファイルを確認してください。",
    "キャッシュの有効期限を五分に変更してください。",
    "서버 로그에서 타임아웃 오류를 찾아 주세요.",
]
_CJK_ASSISTANT = [
    "我已经修改了缓存策略，现在每个请求只读取一次数据库。测试全部通过。",
    "问题出在分页游标：当页面为空时偏移量多加了一。已经修复并添加了回归测试。",
    "ログを確認したところ、接続プールが枯渇していました。上限を増やしました。",
    "迁移脚本已经完成，新的索引让查询速度提高了三倍。",
]
_TOOLS = ("read_file", "grep", "run_tests", "web_search", "write_file", "shell")


class _Words:
    """Zipf-distributed words from `_PROSE` (a few very common, most rare)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.weights = [1 / (rank + 1) ** 0.9 for rank in range(len(_PROSE))]

    def sentence(self, n: int) -> str:
        words = self.rng.choices(_PROSE, self.weights, k=n)
        return " ".join(words).capitalize() + "."

    def prose(self, chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < chars:
            out.append(self.sentence(self.rng.randint(6, 18)))
            size += len(out[-1]) + 1
        return " ".join(out)


def _identifier(rng: random.Random) -> str:
    a, b = rng.choices(_PROSE[40:], k=2)
    return f"{a}_{b}"


def _tool_text(tool: str, rng: random.Random, words: _Words, n: int, chars: int) -> str:
    """About `chars` characters of output shaped like `tool`'s."""
    lines: list[str] = []
    size = 0
    while size < chars:
        if tool in ("read_file", "write_file"):
            name = _identifier(rng)
            line = rng.choice(
                [
                    f"def {name}_{n}(request, *, retries={rng.randint(1, 5)}):",
                    f"    payload = request.json().get('{rng.choice(_PROSE[40:])}', [])",
                    f"    result = {name}(payload, attempt=attempt, tag='t{n}')",
                    f"    if result.{rng.choice(['ok', 'failed', 'empty'])}:",
                    f"        return {name}.value  # {words.sentence(5)}",
                    f"    raise RuntimeError(f'{name} {n} failed after {{retries}} attempts')",
                    "",
                ]
            )
        elif tool == "grep":
            where = f"src/{rng.choice(_PROSE[60:])}/{_identifier(rng)}.py:{rng.randint(1, 900)}"
            line = f"{where}:    {words.sentence(8)}"
        elif tool == "run_tests":
            status = rng.choices(["PASSED", "FAILED", "SKIPPED"], [20, 2, 1])[0]
            line = f"tests/test_{_identifier(rng)}.py::test_{_identifier(rng)} {status}"
            if status == "FAILED":
                expected, got = rng.randint(0, 99), rng.randint(0, 99)
                line += f"\nE   AssertionError: expected {expected} got {got} in {_identifier(rng)}"
        elif tool == "web_search":
            line = json.dumps(
                {
                    "title": words.sentence(6),
                    "url": f"https://docs.example.com/{rng.choice(_PROSE[40:])}/{n}",
                    "snippet": words.sentence(24),
                }
            )
        else:
            command = f"{rng.choice(['$', '>'])} {rng.choice(_PROSE[80:])} --{rng.choice(_PROSE[40:])} {n}"
            line = f"{command}: {words.sentence(10)}"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def search_messages(seed: int = 5) -> Iterator[ModelMessage]:
    """An endless, varied agent conversation, every message with an id and a timestamp ~7 s after the last."""
    rng = random.Random(seed)
    words = _Words(rng)
    n = 0
    facts = iter(_RARE_FACTS)
    next_summary = SUMMARY_EVERY

    def stamp() -> datetime:
        return EPOCH + timedelta(seconds=7 * n)

    def done(message: ModelMessage) -> ModelMessage:
        nonlocal n
        ensure_message_id(message)
        n += 1
        return message

    yield done(
        ModelRequest(
            parts=[
                SystemPromptPart("You are a careful coding assistant. Read files before changing them."),
                UserPromptPart("Help me find why the batch handlers fail under load.", timestamp=stamp()),
            ]
        )
    )
    task = 0
    while True:
        task += 1
        for _ in range(rng.randint(3, 12)):
            tool = rng.choice(_TOOLS)
            call_id = f"call_{n:08d}"
            args: dict[str, Any]
            if tool == "write_file":
                args = {"path": f"src/{_identifier(rng)}.py", "content": _tool_text(tool, rng, words, n, 2_000)}
            elif tool in ("grep", "web_search"):
                args = {"pattern" if tool == "grep" else "query": " ".join(rng.choices(_PROSE[40:], k=3))}
            else:
                args = {"path": f"src/{_identifier(rng)}.py"} if tool == "read_file" else {"cmd": tool}
            yield done(
                ModelResponse(
                    parts=[TextPart(words.prose(rng.randint(60, 300))), ToolCallPart(tool, args, tool_call_id=call_id)],
                    timestamp=stamp(),
                )
            )
            output = (
                f"Wrote {len(args['content'])} bytes to {args['path']}"
                if tool == "write_file"
                else _tool_text(tool, rng, words, n, rng.randint(1_300, 3_600))
            )
            if rng.random() < 0.01:
                output += "\n" + next(facts, words.sentence(12))
            yield done(ModelRequest(parts=[ToolReturnPart(tool, output, tool_call_id=call_id, timestamp=stamp())]))
        answer = rng.choice(_CJK_ASSISTANT) if rng.random() < 0.08 else words.prose(rng.randint(400, 2_500))
        if rng.random() < 0.05:
            answer += " " + next(facts, words.sentence(12))
        yield done(ModelResponse(parts=[TextPart(answer)], timestamp=stamp()))
        if n >= next_summary:
            next_summary += SUMMARY_EVERY
            info = {"covered_messages": SUMMARY_EVERY, "summarizer": "benchmark", "created_at": stamp().isoformat()}
            summary = f"Summary of the conversation so far (task {task}): " + words.prose(3_000)
            yield done(ModelRequest(parts=[CompactionPart(content=summary, metadata={SUMMARY_METADATA_KEY: info})]))
        prompt = rng.choice(_CJK_USER) if rng.random() < 0.1 else words.prose(rng.randint(60, 400))
        yield done(ModelRequest(parts=[UserPromptPart(f"Task {task}: {prompt}", timestamp=stamp())]))


QUERIES: list[tuple[str, str]] = [
    # common words (match thousands of messages)
    ("common", "error"),
    ("common", "the"),
    ("common", "test"),
    ("common", "file"),
    ("common", "request"),
    ("common", "cache"),
    ("common", "retry"),
    ("common", "handler"),
    # less common words
    ("word", "heartbeat"),
    ("word", "liveness"),
    ("word", "checksum"),
    ("word", "quaternion"),
    ("word", "timezone"),
    ("word", "interrupt"),
    ("word", "replica"),
    ("word", "cron"),
    # several words (ORed, ranked by BM25)
    ("words", "database migration timeout"),
    ("words", "retry failed connection pool"),
    ("words", "deploy staging kubernetes"),
    ("words", "parse json payload error"),
    ("words", "flaky test slow"),
    ("words", "session token limit"),
    # phrases
    ("phrase", '"connection pool"'),
    ("phrase", '"failed after"'),
    ("phrase", '"expected 42 got"'),
    ("phrase", '"retry after"'),
    ("phrase", '"paginate_cursor when the page was empty"'),
    ("phrase", '"four spaces"'),
    # prefixes
    ("prefix", "migrat*"),
    ("prefix", "serial*"),
    ("prefix", "heart*"),
    ("prefix", "pars*"),
    ("prefix", "kub*"),
    ("prefix", "octar*"),
    # rare facts and identifiers
    ("rare", "kestrel-rotator"),
    ("rare", "ZX-40417"),
    ("rare", "libfrobnicate"),
    ("rare", "flamingo Marguerite"),
    ("rare", "xylograph arena"),
    ("rare", "ops-archive-9c1f"),
    ("rare", "call_00004242"),
    ("rare", "Makefiles tabs"),
    # CJK
    ("cjk", "数据库"),
    ("cjk", "配置文件"),
    ("cjk", "单元测试"),
    ("cjk", "エラー"),
    ("cjk", "接続プール"),
    ("cjk", "타임아웃"),
    # nothing matches
    ("none", "zygomorphic"),
    ("none", '"purple elephant"'),
]


def write_history(path: Path, size: int) -> tuple[list[ModelMessage], Iterator[ModelMessage]]:
    stream = search_messages()
    history = [next(stream) for _ in range(size)]
    store = JsonHistoryStore.open(path)
    for start in range(0, size, 1_000):
        store.append_sync(history[start : start + 1_000])
    return history, stream


# -- History search: the measurements ------------------------------------------------------------------------------


@dataclass
class SearchResults:
    messages: int
    file_bytes: int
    index_bytes: int
    builds: list[float]
    """Cold builds: `await search.update(index)` with no index file."""
    build_read: float
    """Reading and parsing messages.json alone (`SessionIndex.read_pending` on a new index, nothing inserted)."""
    end_to_end: Timing
    """`await HistoryArchiveSearch.search(query)` (update check + query + formatted excerpts)."""
    raw: Timing
    """`SessionIndex.search(fts_query)` alone."""
    by_kind: dict[str, tuple[float, float]]
    """Query kind -> (end-to-end median, raw median)."""
    slowest: list[tuple[str, float, int]]
    """(query, end-to-end median, hits shown) of the slowest queries."""
    update: Timing
    """`await search.update(index)` after 2 messages were appended."""
    update_read: Timing
    update_insert: Timing
    noop_update: Timing
    """`await search.update(index)` when nothing was appended (every search pays it)."""
    first_query_s: float
    """The first query after the index was closed (connection opened, caches cold), untimed in the rest."""
    queries: int = 0
    hits_found: dict[str, int] = field(default_factory=dict[str, int])

    @property
    def build_s(self) -> float:
        return statistics.median(self.builds)

    @property
    def ok_build(self) -> bool:
        return self.build_s < TARGET_BUILD_S

    @property
    def ok_query(self) -> bool:
        return self.end_to_end.median < TARGET_QUERY_S

    @property
    def ok_update(self) -> bool:
        return self.update.median < TARGET_UPDATE_S

    @property
    def ok(self) -> bool:
        return self.ok_build and self.ok_query and self.ok_update


def _remove_index(index: SessionIndex) -> None:
    index.close()
    for leftover in index.index_path.parent.glob(index.index_path.name + "*"):
        leftover.unlink()  # the database and its -wal / -shm files


async def _cold_builds(path: Path, repeats: int) -> tuple[list[float], float, SessionIndex, HistoryArchiveSearch]:
    """(build times, parse time, the built index, its search): each build starts without index files."""
    probe = SessionIndex(path)
    _remove_index(probe)
    start = time.perf_counter()
    probe.read_pending()  # reading and parsing only (nothing inserted)
    read = time.perf_counter() - start
    _remove_index(probe)
    builds: list[float] = []
    search = HistoryArchiveSearch(messages_path=path)
    index = search.index_for(path)
    for _ in range(repeats):
        _remove_index(index)
        gc.collect()
        start = time.perf_counter()
        await search.update(index)
        builds.append(time.perf_counter() - start)
    return builds, read, index, search


@dataclass
class _QueryTimes:
    e2e: dict[str, list[float]]
    raw: dict[str, list[float]]
    shown: dict[str, int]
    noop: list[float]
    first: float = 0.0


async def _time_queries(search: HistoryArchiveSearch, index: SessionIndex, rounds: int) -> _QueryTimes:
    times = _QueryTimes({q: [] for _, q in QUERIES}, {q: [] for _, q in QUERIES}, {}, [])
    index.close()  # the first query opens the index again, as after a restart
    start = time.perf_counter()
    await search.search(QUERIES[0][1])
    times.first = time.perf_counter() - start
    for _, query in QUERIES:  # one untimed round: SQLite's page cache holds what the queries read
        await search.search(query)
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            for _, query in QUERIES if r % 2 == 0 else QUERIES[::-1]:
                start = time.perf_counter()
                result = await search.search(query)
                times.e2e[query].append(time.perf_counter() - start)
                times.shown[query] = result.total_shown
                fts = build_fts_query(query)
                start = time.perf_counter()
                index.search(fts, limit=search.max_results)
                times.raw[query].append(time.perf_counter() - start)
        for _ in range(rounds * 10):
            start = time.perf_counter()
            await search.update(index)
            times.noop.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return times


async def _time_updates(
    search: HistoryArchiveSearch, index: SessionIndex, stream: Iterator[ModelMessage], iterations: int
) -> tuple[list[float], list[float], list[float]]:
    """(end-to-end updates, read_pending, apply) after 2 appended messages each; the two kinds alternate."""
    updates: list[float] = []
    reads: list[float] = []
    inserts: list[float] = []
    store = JsonHistoryStore.open(search.messages_path or "")
    gc.collect()
    gc.disable()
    try:
        for i in range(iterations):
            store.append_sync([next(stream), next(stream)])
            if i % 2 == 0:  # end to end
                start = time.perf_counter()
                added = await search.update(index)
                updates.append(time.perf_counter() - start)
            else:  # the two halves, synchronously (no thread hop)
                start = time.perf_counter()
                pending = index.read_pending()
                reads.append(time.perf_counter() - start)
                start = time.perf_counter()
                added = index.apply(pending, {})
                inserts.append(time.perf_counter() - start)
            assert added == 2, added
    finally:
        gc.enable()
        store.close()
    return updates, reads, inserts


async def run_search(*, quick: bool = False) -> SearchResults:
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        path = Path(tmp) / "messages.json"
        history, stream = write_history(path, SEARCH_SIZE)
        file_bytes = path.stat().st_size
        del history
        gc.collect()
        builds, read, index, search = await _cold_builds(path, BUILD_REPEATS_QUICK if quick else BUILD_REPEATS)
        times = await _time_queries(search, index, QUERY_ROUNDS_QUICK if quick else QUERY_ROUNDS)
        updates, reads, inserts = await _time_updates(search, index, stream, 40 if quick else UPDATE_ITERATIONS)
        index.close()  # checkpoints the write-ahead log into the database file
        index_bytes = sum(p.stat().st_size for p in path.parent.glob(index.index_path.name + "*"))

    by_kind: dict[str, tuple[float, float]] = {}
    for kind in dict.fromkeys(k for k, _ in QUERIES):
        qs = [q for k, q in QUERIES if k == kind]
        by_kind[kind] = (
            statistics.median([s for q in qs for s in times.e2e[q]]),
            statistics.median([s for q in qs for s in times.raw[q]]),
        )
    medians = sorted(((q, statistics.median(times.e2e[q]), times.shown[q]) for _, q in QUERIES), key=lambda t: -t[1])
    return SearchResults(
        messages=SEARCH_SIZE,
        file_bytes=file_bytes,
        index_bytes=index_bytes,
        builds=builds,
        build_read=read,
        end_to_end=Timing([s for v in times.e2e.values() for s in v]),
        raw=Timing([s for v in times.raw.values() for s in v]),
        by_kind=by_kind,
        slowest=medians[:5],
        update=Timing(updates),
        update_read=Timing(reads),
        update_insert=Timing(inserts),
        noop_update=Timing(times.noop),
        first_query_s=times.first,
        queries=len(QUERIES),
        hits_found=times.shown,
    )


# -- Report ------------------------------------------------------------------------------------------------------


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def all_ok(eviction: EvictionResult, search: SearchResults) -> bool:
    return eviction.ok and search.ok


def eviction_lines(r: EvictionResult, iterations: int) -> list[str]:
    return [
        "## EvictionProcessor",
        "",
        f"`EvictionProcessor(backend=StateBackend())` (default `token_limit` 20,000 tokens) on a history of "
        f"{EVICT_SIZE:,} messages holding {BIG_OUTPUTS} tool outputs of {BIG_CHARS // 1000} KB (JSON, log, CSV, "
        f"plain text) among ~{EVICT_SIZE // 2 - BIG_OUTPUTS} outputs of 2 KB.",
        "",
        "### Target",
        "",
        f"- Issue 4: the per-request cost when nothing new is evicted stays under {fmt_time(TARGET_EVICT_S)} "
        "(median): a request after the first in a run, the history grew by one response and one request (a 2 KB "
        "tool output) since the previous one.",
        "",
        f"**Result: {'target met' if r.ok else 'target NOT met'}.**",
        "",
        "| Path | Median | p90 | Samples | Target |",
        "|---|---:|---:|---:|:-:|",
        f"| Later request of a run (`_process` with the run state): only the new messages are scanned "
        f"| {fmt_time(r.per_request.median)} | {fmt_time(r.per_request.p90)} | {len(r.per_request.samples)} "
        f"| {_yes(r.ok)} |",
        f"| `before_model_request` in `Agent.run`, later requests "
        f"| {fmt_time(r.agent_later.median)} | {fmt_time(r.agent_later.p90)} | {len(r.agent_later.samples)} "
        f"| {_yes(r.agent_later.median < TARGET_EVICT_S)} |",
        f"| First request of a run (fresh run state: whole history scanned) | {fmt_time(r.first_request.median)} "
        f"| {fmt_time(r.first_request.p90)} | {len(r.first_request.samples)} | (reference) |",
        f"| `before_model_request` in `Agent.run`, first request | {fmt_time(r.agent_first.median)} "
        f"| {fmt_time(r.agent_first.p90)} | {len(r.agent_first.samples)} | (reference) |",
        f"| Plain form `await processor(messages)` (no run state: whole history scanned every call) "
        f"| {fmt_time(r.plain.median)} | {fmt_time(r.plain.p90)} | {len(r.plain.samples)} | (reference) |",
        f"| First call on the loaded history: evicts the {r.evicted} outputs of {BIG_CHARS // 1000} KB "
        f"| {fmt_time(r.cold_s)} | | 1 | (reference) |",
        "",
        f"In `Agent.run`, {r.agent_incremental} of {r.agent_later_count} later requests took the incremental path "
        "(pydantic-ai hands the hook the same message objects from request to request, so the run state matches).",
        "",
        "### Why a request does not rescan the history",
        "",
        "- In capability form every run gets its own `RunState` (`for_run`) holding a `HistoryCursor`: the history "
        "as it was after the previous request. When the history only grew, only the new messages are visited; an "
        "edited message is visited again, and a history replaced from some index is scanned from there. The "
        "cursor (`fingerprint_all=False`) fingerprints only the last messages, which it checks for in-place "
        "edits on every request, so a first request costs a reference per message.",
        "- Outputs already evicted carry their eviction metadata, so even a full scan only reads it and moves on; "
        "every other tool output costs a synchronous check (its metadata, its length against the limit of its "
        "policy); the eviction coroutine runs only for an output that is over the limit.",
        "- The plain form has no state across calls; it is meant for histories loaded from elsewhere, once.",
        "",
        "### Method",
        "",
        f"- History: `benchmarks/run.py`'s generator ({EVICT_SIZE:,} messages ending with a text answer; tool "
        f"outputs of 2,048 characters), {BIG_OUTPUTS} evenly spread outputs replaced by ~{BIG_CHARS:,}-character "
        f"documents. After the first call evicted them (the history then holds {r.history_chars:,} characters of "
        "tool output), simulated runs: a fresh `RunState` and one call (the first request), then "
        f"{REQUESTS_PER_RUN} times: the history grows by a `ModelResponse` with a tool call and a `ModelRequest` "
        "with its 2 KB return, `await processor._process(messages, state, None)` is timed, then the plain "
        "`await processor(messages)` on the same history. The history then goes back to its "
        f"{EVICT_SIZE:,} messages for the next run; {iterations} later requests in all, garbage collector paused.",
        f"- `Agent.run`: a subclass times its own `before_model_request`; {len(r.agent_first.samples)} runs of a "
        f"`FunctionModel` agent on the evicted {EVICT_SIZE:,}-message history, each making {REQUESTS_PER_RUN} "
        "`read_file` tool calls (2 KB outputs) and a final answer.",
        "",
    ]


def search_lines(s: SearchResults) -> list[str]:
    kinds = {
        "common": "common words",
        "word": "less common words",
        "words": "several words",
        "phrase": "phrases",
        "prefix": "prefixes",
        "rare": "rare terms, identifiers",
        "cjk": "Chinese, Japanese, Korean",
        "none": "no match",
    }
    lines = [
        "## History search",
        "",
        f"`HistoryArchiveSearch(messages_path=...)` over a messages.json of {s.messages:,} messages "
        f"({s.file_bytes / 1e6:,.1f} MB) written by `JsonHistoryStore`; the SQLite FTS5 index beside it "
        f"(`messages.json.index.sqlite`) takes {s.index_bytes / 1e6:,.1f} MB.",
        "",
        "### Targets",
        "",
        f"- Issue 5: a cold rebuild of the index under {fmt_time(TARGET_BUILD_S)}; a query in under "
        f"{fmt_time(TARGET_QUERY_S)} (median) once the index exists; appending 2 messages updates the index in "
        f"under {fmt_time(TARGET_UPDATE_S)} (median).",
        "",
        f"**Result: {'all targets met' if s.ok else 'targets NOT met'}.**",
        "",
        "| Target | Measured | Met |",
        "|---|---:|:-:|",
        f"| Cold build < {fmt_time(TARGET_BUILD_S)} (median of {len(s.builds)}) | {fmt_time(s.build_s)} "
        f"| {_yes(s.ok_build)} |",
        f"| Query < {fmt_time(TARGET_QUERY_S)}: `HistoryArchiveSearch.search`, median over "
        f"{len(s.end_to_end.samples)} queries | {fmt_time(s.end_to_end.median)} | {_yes(s.ok_query)} |",
        f"| Index update after appending 2 messages < {fmt_time(TARGET_UPDATE_S)}: `await search.update(index)`, "
        f"median | {fmt_time(s.update.median)} | {_yes(s.ok_update)} |",
        "",
        "### Queries",
        "",
        "| Path | Median | p90 | Max | Samples |",
        "|---|---:|---:|---:|---:|",
        f"| End to end: `await HistoryArchiveSearch.search(query)` | {fmt_time(s.end_to_end.median)} "
        f"| {fmt_time(s.end_to_end.p90)} | {fmt_time(max(s.end_to_end.samples))} | {len(s.end_to_end.samples)} |",
        f"| Raw: `SessionIndex.search(fts_query, limit=10)` | {fmt_time(s.raw.median)} | {fmt_time(s.raw.p90)} "
        f"| {fmt_time(max(s.raw.samples))} | {len(s.raw.samples)} |",
        f"| Update check alone, nothing appended: `await search.update(index)` | {fmt_time(s.noop_update.median)} "
        f"| {fmt_time(s.noop_update.p90)} | {fmt_time(max(s.noop_update.samples))} | {len(s.noop_update.samples)} |",
        f"| First query after the index was closed, end to end (reference: the connection opens with an empty cache, "
        f"right after the builds wrote the files) | {fmt_time(s.first_query_s)} | | | 1 |",
        "",
        "| Query kind | Examples | End to end: median | Raw: median |",
        "|---|---|---:|---:|",
    ]
    for kind, (e2e, raw) in s.by_kind.items():
        examples = ", ".join(f"`{q}`" for k, q in QUERIES if k == kind)
        lines.append(f"| {kinds.get(kind, kind)} | {examples} | {fmt_time(e2e)} | {fmt_time(raw)} |")
    lines += [
        "",
        "Slowest queries (end to end, median): "
        + "; ".join(f"`{q}` {fmt_time(t)} ({n} shown)" for q, t, n in s.slowest)
        + ".",
        "",
        "### Index build and update",
        "",
        "| Step | Median | p90 | Samples |",
        "|---|---:|---:|---:|",
        f"| Cold build: `await search.update(index)` with no index file | {fmt_time(s.build_s)} "
        f"| {fmt_time(max(s.builds))} (max) | {len(s.builds)} |",
        "| Reading and parsing messages.json alone (`read_pending` on a new index, timed once) "
        f"| {fmt_time(s.build_read)} | | 1 |",
        f"| Update after appending 2 messages: `await search.update(index)` | {fmt_time(s.update.median)} "
        f"| {fmt_time(s.update.p90)} | {len(s.update.samples)} |",
        f"| of which `SessionIndex.read_pending()` (sync) | {fmt_time(s.update_read.median)} "
        f"| {fmt_time(s.update_read.p90)} | {len(s.update_read.samples)} |",
        f"| of which `SessionIndex.apply(pending, ...)` (sync) | {fmt_time(s.update_insert.median)} "
        f"| {fmt_time(s.update_insert.p90)} | {len(s.update_insert.samples)} |",
        "",
        "### Why queries and updates stay fast",
        "",
        "- The index keeps how far into messages.json it has read: an update parses only the bytes appended "
        "since, inserts their messages in one transaction, and takes a single worker-thread hop when no evicted "
        "output has to be fetched from the backend. The file's first record is re-parsed only when its bytes "
        "changed.",
        "- A query ranks row ids first (`bm25` over the matching messages, top 10 kept) and reads the bodies of "
        "those 10 rows only. Sorting whole rows would copy the body of every match into SQLite's sorter: a "
        "common word matches most of the 10,000 messages, and that copy took more than half of the query. What "
        "is left grows with the number of matching messages (BM25 scores every match); phrases and rare terms "
        "cost well under a millisecond.",
        "",
        "### Method",
        "",
        f"- The history: a generated agent conversation of {s.messages:,} messages with ids and timestamps — tasks "
        "opened by a user prompt (10% in Chinese, Japanese or Korean), 3 to 12 tool steps each (assistant text and "
        "a call to `read_file`, `grep`, `run_tests`, `web_search`, `write_file` with ~2 KB of content, or `shell`; "
        "outputs of 1.3 to 3.6 KB shaped like code, grep lines, test logs, JSON results), an assistant answer "
        f"(8% in Chinese or Japanese), a summary (`CompactionPart`) every ~{SUMMARY_EVERY:,} messages, and eight "
        "one-off facts. Words follow a Zipf-like distribution over a vocabulary of ~280 words, plus identifiers "
        "built from them. Written with `JsonHistoryStore.append_sync` in batches of 1,000.",
        f"- Cold build: index files deleted, then `await HistoryArchiveSearch.update(index)` (read, parse, render, "
        f"insert, one transaction), {len(s.builds)} times; garbage collector on.",
        f"- Queries: {s.queries} queries of the kinds above. The index is closed, the first query timed alone, "
        f"then one untimed round; then {len(s.end_to_end.samples) // s.queries} rounds (forward, then backward), "
        "each query timed end to end (`await search.search(query)`: query parsing, the update check in a "
        "worker thread, the query in a worker thread, excerpts and formatting of up to 10 hits) and then raw "
        "(`SessionIndex.search` called directly, in the event loop's thread). Garbage collector paused.",
        "- Updates: 2 messages appended with `JsonHistoryStore.append_sync` (not timed), then alternately the end-to-"
        "end `await search.update(index)` or the two synchronous halves timed apart.",
        "",
    ]
    return lines


def markdown_lines(eviction: EvictionResult, search: SearchResults, iterations: int) -> list[str]:
    return eviction_lines(eviction, iterations) + search_lines(search)


def print_deep(eviction: EvictionResult, search: SearchResults) -> None:
    e = eviction
    print(
        f"eviction: later request median {fmt_time(e.per_request.median)} p90 {fmt_time(e.per_request.p90)}; "
        f"first request {fmt_time(e.first_request.median)}; plain {fmt_time(e.plain.median)}; "
        f"Agent.run later {fmt_time(e.agent_later.median)} ({e.agent_incremental}/{e.agent_later_count} "
        f"incremental), first {fmt_time(e.agent_first.median)}; cold {fmt_time(e.cold_s)} ({e.evicted} evicted) "
        f"({'ok' if e.ok else 'MISSED'})"
    )
    s = search
    print(
        f"search: {s.messages:,} messages, {s.file_bytes / 1e6:.1f} MB, index {s.index_bytes / 1e6:.1f} MB; "
        f"build {fmt_time(s.build_s)} (read {fmt_time(s.build_read)}); query e2e median "
        f"{fmt_time(s.end_to_end.median)} p90 {fmt_time(s.end_to_end.p90)}, raw median {fmt_time(s.raw.median)} "
        f"p90 {fmt_time(s.raw.p90)}; update median {fmt_time(s.update.median)} p90 {fmt_time(s.update.p90)} "
        f"(read {fmt_time(s.update_read.median)}, insert {fmt_time(s.update_insert.median)}; no-op "
        f"{fmt_time(s.noop_update.median)}) ({'ok' if s.ok else 'MISSED'})"
    )
    for kind, (e2e, raw) in s.by_kind.items():
        print(f"  {kind:<8} e2e {fmt_time(e2e):>10}  raw {fmt_time(raw):>10}")
    for q, t, n in s.slowest:
        print(f"  slow: {q!r} {fmt_time(t)} ({n} shown)")


async def run_deep(iterations: int, *, quick: bool = False) -> tuple[EvictionResult, SearchResults]:
    eviction = await run_eviction(iterations, quick=quick)
    search = await run_search(quick=quick)
    return eviction, search


if __name__ == "__main__":  # quick look without regenerating the page: python benchmarks/deep.py [iterations]
    import sys

    result = asyncio.run(run_deep(int(sys.argv[1]) if len(sys.argv) > 1 else 30, quick=True))
    print_deep(*result)
    sys.exit(0 if all_ok(*result) else 1)
