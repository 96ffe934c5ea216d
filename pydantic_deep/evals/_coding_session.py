"""`CodingSession`: a deterministic scripted coding agent through the real `create_deep_agent` stack.

Six user requests (runs) on a billing library written to a temporary directory, the history carried from run to
run: about 167 model requests of file reads, greps, test runs, edits, writes, todo updates and fetched documents
(see `_coding_script`). The session opens with a history imported from an earlier session, whose parallel calls'
results are stored in the order they finished, not the order they were made: the processors see them so (a run
of pydantic-ai stores results in call order, so only a handed-in history has this shape), while pydantic-ai
sends them to the model in call order. The model (`RecordingModel`) records every
request as it received it and answers summary requests, so a benchmark can price each request with a prefix
cache and tell how many summaries a configuration needed.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, ModelRetry, ToolReturn
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

from summarization_pydantic_ai import render_messages, validate_history
from summarization_pydantic_ai.evals import RecordedRequest, RecordingModel, scripted_summary

from ..agent import create_deep_agent
from ..backends import LocalBackend
from ..deps import DeepAgentDeps
from ..filesystem import format_ls, number_lines
from ..todos import render_todos
from ._coding_project import README, document, write_project
from ._coding_script import PHASES, RUNS, Run
from ._coding_tests import TestRunner

__all__ = ["CodingSession", "CodingSessionResult"]

_PAUSE_BETWEEN_RUNS = 90.0
"""Virtual seconds a user takes to read an answer and write the next request (under a 5-minute cache TTL)."""
_PRELUDE_PROMPT = "Have a look around the repository and tell me how it is organised."


@dataclass
class CodingSessionResult:
    """What a session produced: the final history, every request the model received, each run's history, and
    what the probes look for (the latest user request, the todo list, the last test result)."""

    messages: list[ModelMessage]
    requests: list[RecordedRequest]
    run_histories: list[list[ModelMessage]]
    latest_prompt: str
    todo_list: str
    last_test_result: str | None
    """The counts and time of the latest test run (`'1664 passed in 27.37s'`)."""

    @property
    def turn_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if not r.is_summary]

    @property
    def summary_requests(self) -> int:
        return sum(1 for r in self.requests if r.is_summary)

    @property
    def total_request_tokens(self) -> int:
        return sum(r.tokens for r in self.turn_requests)

    @property
    def max_request_tokens(self) -> int:
        return max((r.tokens for r in self.turn_requests), default=0)

    def history_problems(self) -> list[str]:
        """Every `validate_history` problem of a run's final history or of a request the model received."""
        found = [
            f"run {i}: {p}" for i, h in enumerate(self.run_histories) for p in validate_history(h, for_request=False)
        ]
        found += [f"request {r.index}: {p}" for r in self.requests for p in validate_history(r.messages)]
        return found

    def probes(self) -> dict[str, bool]:
        """Whether the last request of the session (its instructions and messages) still holds the latest user
        request (verbatim), the current todo list, and the last test result."""
        last = self.turn_requests[-1]
        text = f"{last.instructions or ''}\n{render_messages(last.messages)}"
        return {
            "latest user request": self.latest_prompt in text,
            "todo list": self.todo_list in text,
            "last test result": self.last_test_result is not None and self.last_test_result in text,
        }


@dataclass
class CodingSession:
    """The scripted coding agent: `await CodingSession().run(**create_deep_agent_kwargs)` plays every run.

    Example:
        ```python
        result = await CodingSession(runs=2).run(context=ContextConfig('hybrid', max_tokens=32_000))
        assert not result.history_problems()
        ```
    """

    runs: int = len(RUNS)
    """How many of the six user requests to play (the first ones)."""
    keep_workspace: bool = False
    """Keep the temporary directory (project, sessions, evicted outputs) after `run` (see `workspace`)."""
    workspace: Path | None = field(default=None, init=False)
    recorder: RecordingModel = field(init=False)
    _runner: TestRunner | None = field(default=None, init=False, repr=False)
    _run: int = field(default=0, init=False, repr=False)
    _step: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.runs <= len(RUNS):
            raise ValueError(f"runs must be between 1 and {len(RUNS)}, got {self.runs}")
        self.recorder = RecordingModel(self._plan, summarize=_summary, name="scripted-coding")

    @property
    def phases(self) -> tuple[str, ...]:
        """The phase names of the runs played (for `ContextConfig(checkpoint_phases=...)`)."""
        return PHASES[: self.runs]

    @property
    def planned_requests(self) -> int:
        """The model requests the runs' steps make (summary requests come on top)."""
        return sum(len(run.steps) for run in RUNS[: self.runs])

    def model(self) -> FunctionModel:
        return self.recorder.model()

    def tools(self) -> list[Any]:
        """The session's own tools, beside the harness's file and todo tools: `run_tests` and `fetch_url`."""
        return [self.run_tests, self.fetch_url]

    def agent(self, **kwargs: Any) -> Agent[DeepAgentDeps, Any]:
        """`create_deep_agent` with the scripted model and the session's tools; `kwargs` configure the stack."""
        return create_deep_agent(self.model(), tools=self.tools(), **kwargs)

    async def run(self, agent: Agent[DeepAgentDeps, Any] | None = None, **kwargs: Any) -> CodingSessionResult:
        """Play the runs through `agent` (default: `self.agent(**kwargs)`) in a new temporary workspace."""
        if self.workspace is not None:
            raise RuntimeError("a CodingSession plays once: make a new one for another run")
        agent = agent or self.agent(**kwargs)
        self.workspace = Path(tempfile.mkdtemp(prefix="coding-session-"))
        try:
            return await self._play(agent, self.workspace)
        finally:
            if not self.keep_workspace:
                shutil.rmtree(self.workspace, ignore_errors=True)

    async def _play(self, agent: Agent[DeepAgentDeps, Any], root: Path) -> CodingSessionResult:
        project = root / "project"
        write_project(project)
        self._runner = TestRunner(project)
        deps = DeepAgentDeps.on_disk(project, base_dir=root / ".pydantic-deep", session_id="coding-session")
        history = await _prelude(LocalBackend(project))
        histories: list[list[ModelMessage]] = []
        for index, run in enumerate(RUNS[: self.runs]):
            self._run, self._step = index, 0
            result = await agent.run(run.prompt, message_history=history, deps=deps)
            history = result.all_messages()
            histories.append(history)
            self.recorder.pause(_PAUSE_BETWEEN_RUNS)
        summary = self._runner.last_summary
        return CodingSessionResult(
            messages=history,
            requests=list(self.recorder.requests),
            run_histories=histories,
            latest_prompt=RUNS[self.runs - 1].prompt,
            todo_list=render_todos(deps.todos),
            last_test_result=summary.strip("= ") if summary else None,
        )

    # -- the scripted model ----------------------------------------------------------------------------------------

    def _plan(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        run = RUNS[self._run]
        index = min(self._step, len(run.steps) - 1)
        self._step += 1
        step = run.steps[index]
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        calls = list(step)
        if index == len(run.steps) - 2 and "complete_phase" in {t.name for t in info.function_tools}:
            calls.append(_complete_phase(run))
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, tool_call_id=f"call_{self._run}_{index:02d}_{k}")
                for k, (name, args) in enumerate(calls)
            ]
        )

    # -- the session's tools ---------------------------------------------------------------------------------------

    async def run_tests(self, path: str = "tests") -> str:
        """Run `pytest -v` on `path`: "tests" (everything), a group ("tests/core", "tests/billing", "tests/ops")
        or one test file; returns the log."""
        if self._runner is None:
            raise RuntimeError("run_tests is only available while the session plays")
        try:
            return self._runner.run(path)
        except LookupError as exc:
            raise ModelRetry(str(exc)) from exc

    async def fetch_url(self, url: str) -> ToolReturn:
        """Fetch a web page; its text comes back as a document after the result."""
        page = document(f"Reference: {url}")
        return ToolReturn(f"Fetched {url} ({len(page.split()):,} words): the page follows.", content=page)


def _complete_phase(run: Run) -> tuple[str, dict[str, Any]]:
    state = {"phase": run.phase, "request": run.prompt}
    return ("complete_phase", {"name": run.phase, "objectives": [f"{run.phase} done"], "state": state})


def _summary(messages: Any) -> str:
    """The scripted summary, with the latest test result seen in what it summarizes as the current state."""
    found = [line.strip("= ") for line in render_messages(messages).splitlines() if _is_test_summary(line)]
    state = f"Latest test run: {found[-1]}." if found else "No test run yet."
    return scripted_summary(messages, default="The coding session so far.", sections={"Current state": state})


def _is_test_summary(line: str) -> bool:
    return line.startswith("=") and line.endswith("=") and (" passed" in line or " failed" in line) and " in " in line


async def _prelude(backend: LocalBackend) -> list[ModelMessage]:
    """An earlier exchange imported from another client: three parallel calls, their results stored in the
    order they finished (the glob, then the read, then the listing)."""
    calls = [
        ToolCallPart("ls", {"path": "/"}, tool_call_id="prelude_ls"),
        ToolCallPart("read_file", {"path": "/README.md"}, tool_call_id="prelude_read"),
        ToolCallPart("glob", {"pattern": "**/*.py"}, tool_call_id="prelude_glob"),
    ]
    results = {
        "prelude_glob": "\n".join(await backend.glob("**/*.py", "/")),
        "prelude_read": number_lines(README, "/README.md"),
        "prelude_ls": format_ls(await backend.ls("/"), "/"),
    }
    returns = [
        ToolReturnPart(next(c.tool_name for c in calls if c.tool_call_id == i), text, tool_call_id=i)
        for i, text in results.items()
    ]
    answer = "A billing library: `src/ledger` (16 modules), tests in three groups (core, billing, ops), docs."
    return [
        ModelRequest(parts=[UserPromptPart(_PRELUDE_PROMPT)]),
        ModelResponse(parts=[TextPart("Looking at the layout."), *calls]),
        ModelRequest(parts=returns),
        ModelResponse(parts=[TextPart(answer)]),
    ]
