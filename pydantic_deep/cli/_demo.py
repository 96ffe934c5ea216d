"""`pydantic-deep demo`: a scripted coding-agent session through the real `create_deep_agent` stack, offline.

The model is a `FunctionModel` following a script (todos, a long test log, a large search, reads, edits, a memory
note, and a question about something only the compacted history still holds); everything else is the real stack:
eviction, the context manager with the deterministic summarizer, the history file, checkpoints, memory and the
history search. The window is small (9,000 tokens) so compaction happens within the demo.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo
from rich.console import Console

from summarization_pydantic_ai import validate_history

from ..history_search import HistoryArchiveSearch
from ..sessions import SessionManager
from ._demo_project import ERROR_LINE, MARKER, failing_test_log, passing_test_log, write_project
from ._errors import EXIT_ERROR, EXIT_USAGE, CliError
from ._models import ResolvedModel
from ._scripted import scripted_model
from ._state import ChatState
from ._turn import run_turn
from ._ui import Ui

__all__ = ["DEMO_WINDOW", "PROMPTS", "run_demo"]

DEMO_WINDOW = 9_000
Step = tuple[str, dict[str, Any]] | str | Callable[[list[ModelMessage]], str]


def _todos(*states: tuple[str, str]) -> tuple[str, dict[str, Any]]:
    return ("write_todos", {"todos": [{"content": c, "status": s} for c, s in states]})


_FIX_OLD = """    conn = pool.acquire()
    if not order.items:
        raise EmptyOrder(order.id)
    with conn.transaction():
        for item in order.items:
            conn.execute("UPDATE stock SET qty = qty - ? WHERE sku = ?", (item.qty, item.sku))
        order_id = conn.execute("INSERT INTO orders (customer) VALUES (?)", (order.customer,)).lastrowid
    pool.release(conn)
    return order_id"""
_FIX_NEW = """    if not order.items:
        raise EmptyOrder(order.id)  # before acquiring: nothing to give back
    conn = pool.acquire()
    try:
        with conn.transaction():
            for item in order.items:
                conn.execute("UPDATE stock SET qty = qty - ? WHERE sku = ?", (item.qty, item.sku))
            return conn.execute("INSERT INTO orders (customer) VALUES (?)", (order.customer,)).lastrowid
    finally:
        pool.release(conn)"""
_TEST = """import pytest

from inventory.checkout import EmptyOrder, checkout


def test_empty_orders_do_not_leak_connections(pool, empty_order, order):
    for _ in range(pool.size + 1):
        with pytest.raises(EmptyOrder):
            checkout(pool, empty_order)
    assert pool.in_use == 0
    assert checkout(pool, order) > 0
"""
_TASKS = ("Reproduce the failure", "Find the leak", "Fix checkout", "Add a regression test")


def _progress(done: int) -> list[tuple[str, str]]:
    """The todo list with the first `done` tasks completed and the next one in progress."""
    return [(t, "completed" if i < done else "in_progress" if i == done else "pending") for i, t in enumerate(_TASKS)]


def _quote_error(messages: list[ModelMessage]) -> str:
    """The answer to the last question: the error line, quoted from what the history search returned."""
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            found = [line.strip() for line in part.model_response_str().splitlines() if "PoolExhausted:" in line]
            if found:
                return f"The first test run failed with:\n\n    {found[0]}\n\n(found in the saved history)"
    return "The history search did not find the error line."


PROMPTS: list[tuple[str, list[Step]]] = [
    (
        "Checkout tests fail intermittently with 'connection pool exhausted'. Find the cause, fix it, and add a "
        "regression test.",
        [
            _todos(*_progress(0)),
            ("run_tests", {}),
            ("grep", {"pattern": r"acquire\(", "path": "/"}),
            ("read_file", {"path": "/src/inventory/pool.py"}),
            ("read_file", {"path": "/src/inventory/checkout.py"}),
            _todos(*_progress(2)),
            ("edit_file", {"path": "/src/inventory/checkout.py", "old_string": _FIX_OLD, "new_string": _FIX_NEW}),
            ("write_file", {"path": "/tests/test_pool_leak.py", "content": _TEST}),
            ("run_tests", {"path": "tests/test_pool_leak.py"}),
            _todos(*_progress(len(_TASKS))),
            (
                "write_memory",
                {
                    "content": "- inventory: checkout must release pool connections in `finally` (leak fixed; "
                    "regression test tests/test_pool_leak.py)"
                },
            ),
            "Fixed. `checkout()` acquired a connection and raised `EmptyOrder` without releasing it, so ten empty "
            "orders exhausted the pool. It now validates first and releases in `finally`; "
            "tests/test_pool_leak.py covers it.",
        ],
    ),
    (
        "Also expose pool usage as a metric and document it in the README.",
        [
            ("read_file", {"path": "/src/inventory/metrics.py"}),
            ("grep", {"pattern": "in_use", "path": "/src"}),
            (
                "edit_file",
                {
                    "path": "/src/inventory/metrics.py",
                    "old_string": '"checkout_errors_total": 0}',
                    "new_string": '"checkout_errors_total": 0, "pool_in_use": 0}',
                },
            ),
            ("read_file", {"path": "/README.md"}),
            (
                "edit_file",
                {
                    "path": "/README.md",
                    "old_string": "and `checkout_errors_total`.",
                    "new_string": "`checkout_errors_total` and `pool_in_use` (connections checked out).",
                },
            ),
            "Added the `pool_in_use` gauge to /metrics and documented it in the README.",
        ],
    ),
    (
        "What exactly did the first test run report? Quote the error line.",
        [
            ("search_conversation_history", {"query": "connection pool exhausted", "role": "tool"}),
            _quote_error,
        ],
    ),
]


@dataclass
class _Script:
    """The model's side: the steps of the current turn, one per model request."""

    turn: int = 0
    step: int = 0

    def plan(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        steps = PROMPTS[self.turn][1]
        item = steps[min(self.step, len(steps) - 1)]
        self.step += 1
        if isinstance(item, str):
            return ModelResponse(parts=[TextPart(item)])
        if callable(item):
            return ModelResponse(parts=[TextPart(item(messages))])
        return ModelResponse(parts=[ToolCallPart(item[0], item[1])])

    def next_turn(self) -> None:
        self.turn, self.step = self.turn + 1, 0


def _prepare(directory: Path | None) -> Path:
    root = directory.resolve() if directory is not None else Path(tempfile.mkdtemp(prefix="pydantic-deep-demo-"))
    project = root / "project"
    if project.exists() and not (project / MARKER).is_file():
        raise CliError(f"{project} exists and was not written by the demo; choose another --dir", EXIT_USAGE)
    write_project(project)
    return root


def _add_run_tests(state: ChatState) -> None:
    @state.agent.tool_plain
    def run_tests(path: str = "tests") -> str:  # pyright: ignore[reportUnusedFunction]
        """Run pytest on `path` and return its output."""
        return passing_test_log(path) if path.endswith("test_pool_leak.py") else failing_test_log()


async def run_demo(directory: Path | None, console: Console, *, delay: float = 0.0) -> int:
    root = _prepare(directory)
    script = _Script()
    resolved = ResolvedModel("demo (scripted FunctionModel)", scripted_model(script.plan, "demo"), None, DEMO_WINDOW)
    ui = Ui(console, show_usage=True)
    state = ChatState(SessionManager(base_dir=root / ".pydantic-deep"), resolved, root / "project", ui)
    _add_run_tests(state)
    console.rule("pydantic-deep demo: an offline, scripted coding agent")
    ui.line(f"project {state.workdir} · session {state.id} · window {DEMO_WINDOW:,} tokens", style="dim")
    ui.line("Each request: the context bar; then tool calls, evictions (⤓), compactions (⟳), memory writes (✎).")
    for number, (prompt, _) in enumerate(PROMPTS, start=1):
        console.rule(f"turn {number}")
        ui.line(f"› {prompt}", style="bold green")
        outcome = await run_turn(state, prompt)
        if outcome.status != "done":
            raise CliError(f"the demo's turn {number} did not complete: {outcome.error or outcome.status}")
        script.next_turn()
        if delay:
            await asyncio.sleep(delay)
    return await _finish(state, root, console)


async def _finish(state: ChatState, root: Path, console: Console) -> int:
    ui = state.ui
    console.rule("after the session")
    search = HistoryArchiveSearch(messages_path=state.messages_path, backend=state.deps.backend, max_results=1)
    result = await search.search("PoolExhausted connection pool exhausted", role="tool")
    ui.line("Search over the full history (the working context only has a summary of it):", style="bold")
    ui.line(result.text)
    info = await state.describe()
    memory = (state.deps.memory_dir or root) / "MEMORY.md"
    checks = {
        "a large output was evicted": bool(ui.evictions),
        "the context was compacted": bool(ui.compactions),
        "the memory was written": memory.is_file(),
        "the search found the error line": ERROR_LINE.split(": ", 1)[1] in result.text,
        "the working context is valid": validate_history(state.history, for_request=False) == [],
    }
    for what, ok in checks.items():
        ui.line(f"  [{'ok' if ok else 'FAIL'}] {what}", style="green" if ok else "red")
    ui.line(
        f"Session {info.id}: {info.message_count} messages in {info.messages_path}, "
        f"{len(state.history)} in the working context, {len(ui.compactions)} compaction(s).",
        style="bold",
    )
    ui.line("Inspect it:", style="bold")
    for command in (
        f"cd {root}",
        "pydantic-deep sessions",
        f"pydantic-deep show {info.id}",
        f'pydantic-deep search {info.id} "pool exhausted"',
        f"pydantic-deep chat --resume {info.id} --model test --workdir project",
    ):
        ui.line(f"  {command}")
    return 0 if all(checks.values()) else EXIT_ERROR
