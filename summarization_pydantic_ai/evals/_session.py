"""Seeded, realistic coding-agent sessions with planted facts, and the probes that ask for those facts.

A session opens with a system prompt and a task, plans with `write_todos`, reads, creates and edits files
(`read_file`, `write_file`, `edit_file`), runs tests that fail and fixes them, makes decisions at the end of
turns, and ends with a long latest user request (with a screenshot) followed by some work on it. The same seed
always gives the same messages, message ids and probes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from .._messages import MESSAGE_ID_KEY
from ._derive import derive_probes
from ._probes import Probe

__all__ = ["MIN_MESSAGES", "Session", "build_session"]

MIN_MESSAGES = 60
_TAIL_PAIRS = 12  # work done after the latest user request: about 24 messages
_MAX_TODOS = 8

_AREAS = ("billing", "auth", "search", "cache", "export", "scheduler", "payments", "reports", "ingest", "notify")
_KINDS = ("parser", "client", "models", "handlers", "config", "retry", "schema", "views", "tasks", "storage")
_TODO_VERBS = ("add retries to", "write tests for", "document", "refactor", "profile", "migrate")
_CHOICES = (
    "SQLite in WAL mode",
    "a Redis sorted set",
    "append-only JSON lines",
    "a bounded LRU of 512 entries",
    "exponential backoff capped at 30 seconds",
    "strict pydantic models",
    "one asyncio TaskGroup per batch",
    "UTC timestamps in ISO 8601",
    "an idempotency key per request",
)
_REASONS = ("it survives restarts", "it keeps the p99 under 50 ms", "the team already runs it", "it is easy to test")
_ERRORS = (
    "KeyError: 'field_{n}'",
    "AttributeError: 'NoneType' object has no attribute 'retry_{n}'",
    "ValueError: invalid literal for int() with base 10: 'v{n}'",
    "TimeoutError: request {n} timed out after 5.0 seconds",
    "AssertionError: expected status 200, got 5{n:02d}",
)
_FIXES = (
    "default the missing value to zero",
    "check for None before the retry",
    "parse the value as a string first",
    "widen the timeout to 30 seconds",
    "map upstream errors to a 502",
)
_SYSTEM = "You are a careful coding agent. Read files before editing them, keep a todo list, and run the tests."


@dataclass(frozen=True)
class Session:
    """A conversation and the probes it should still answer after compaction."""

    messages: list[ModelMessage]
    probes: list[Probe]
    seed: int | None = None
    """The seed it was built from (`None` for a session loaded from a file)."""
    name: str = "session"


def build_session(messages: int = 200, seed: int = 0) -> Session:
    """A realistic session of at least `messages` messages (a few more at most, ending with a request), with
    planted facts: files created and edited, todo states, decisions, errors and their fixes, and a long latest
    user request with an image. Its probes are the artifact trail (`derive_probes`) and the planted facts.
    Deterministic: the same arguments give the same session."""
    if isinstance(messages, bool) or not isinstance(messages, int) or messages < MIN_MESSAGES:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"messages must be an int of at least {MIN_MESSAGES}, got {messages!r}")
    builder = _Builder(random.Random(seed), seed)
    builder.run(messages)
    # The artifact trail is read back from the messages, as for any session; the rest was planted.
    probes = [*derive_probes(builder.messages), *builder.probes]
    return Session(builder.messages, probes, seed, f"seed {seed}, {len(builder.messages)} messages")


@dataclass
class _Builder:
    rng: random.Random
    seed: int
    messages: list[ModelMessage] = field(default_factory=list[ModelMessage])
    probes: list[Probe] = field(default_factory=list[Probe])
    written: list[str] = field(default_factory=list[str])
    todos: list[dict[str, str]] = field(default_factory=list[dict[str, str]])
    _used: set[str] = field(default_factory=set[str])
    _calls: int = 0
    _facts: int = 0

    def run(self, target: int) -> None:
        self.messages.append(ModelRequest(parts=[SystemPromptPart(_SYSTEM), UserPromptPart(self._task())]))
        self._todo_update(add=4)
        body_end = target - 2 - 2 * _TAIL_PAIRS
        while len(self.messages) < body_end:
            self._episode(tail=False)
        self._latest_request()
        tail_end = len(self.messages) + 2 * _TAIL_PAIRS
        while len(self.messages) < tail_end:
            self._episode(tail=True)
        for index, message in enumerate(self.messages):
            message.metadata = {MESSAGE_ID_KEY: f"s{self.seed}-m{index:05d}"}

    # -- names -----------------------------------------------------------------------------------------------------

    def _unique(self, make: Callable[[], str]) -> str:
        """A value from `make()` never produced before (numbered when the vocabulary runs out)."""
        for _ in range(20):
            value = make()
            if value not in self._used:
                self._used.add(value)
                return value
        self._facts += 1
        value = f"{make()} #{self._facts}"
        self._used.add(value)
        return value

    def _topic(self) -> str:
        return f"the {self.rng.choice(_AREAS)} {self.rng.choice(_KINDS)}"

    def _new_path(self) -> str:
        def make() -> str:
            area, kind = self.rng.choice(_AREAS), self.rng.choice(_KINDS)
            return f"tests/{area}/test_{kind}.py" if self.rng.random() < 0.3 else f"src/{area}/{kind}.py"

        path = self._unique(make)
        if " #" in path:  # the vocabulary ran out: number the file, keeping its extension
            stem, number = path.rsplit(" #", 1)
            path = stem.replace(".py", f"_{number}.py")
        return path

    def _task(self) -> str:
        return f"Please work on {self._topic()}: make it robust and keep the tests green."

    # -- messages --------------------------------------------------------------------------------------------------

    def _call(self, text: str, tool: str, args: dict[str, Any], result: str, outcome: str = "success") -> None:
        self._calls += 1
        call_id = f"call_{self._calls:05d}"
        self.messages.append(ModelResponse(parts=[TextPart(text), ToolCallPart(tool, args, call_id)]))
        part = ToolReturnPart(tool, result, call_id, outcome=outcome)  # pyright: ignore[reportArgumentType]
        self.messages.append(ModelRequest(parts=[part]))

    def _episode(self, *, tail: bool) -> None:
        weights = {"read": 5.0, "write": 2.0, "edit": 2.0, "error": 0.7, "retry": 0.3, "todo": 1.0, "turn": 1.0}
        if tail:  # after the latest request the agent works on it: no new plan, no new turn
            weights.update(todo=0.0, turn=0.0)
        kind = self.rng.choices(list(weights), list(weights.values()))[0]
        if kind in ("edit", "error", "retry") and not self.written:
            kind = "write"
        {
            "read": self._read,
            "write": self._write,
            "edit": self._edit,
            "error": self._error,
            "retry": self._retry,
            "todo": self._todo_update,
            "turn": self._turn,
        }[kind]()

    def _read(self) -> None:
        path = self.rng.choice(self.written) if self.written and self.rng.random() < 0.5 else self._repo_path()
        lines = [f'"""{path}: part of the service."""', "import logging", "", "logger = logging.getLogger(__name__)"]
        count = self.rng.randint(12, 30)
        lines += [f"def step_{j}(payload, *, retries=3):  # reads settings from config/{j}.toml" for j in range(count)]
        numbered = "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, start=1))
        self._call(f"Let me read {path} first.", "read_file", {"path": path}, numbered)

    def _repo_path(self) -> str:
        return f"src/{self.rng.choice(_AREAS)}/{self.rng.choice(_KINDS)}.py"

    def _write(self) -> None:
        path = self._new_path()
        content = "\n".join(f"def handler_{j}(event):\n    return event" for j in range(self.rng.randint(2, 6)))
        lines = content.count("\n") + 1
        result = f"Wrote {path} ({lines} lines, {len(content)} bytes)."
        self._call(f"I'll create {path}.", "write_file", {"path": path, "content": content}, result)
        self.written.append(path)

    def _edit(self, path: str | None = None, new: str = "return dict(event)", text: str | None = None) -> None:
        path = path or self.rng.choice(self.written)
        args = {"path": path, "old_string": "return event", "new_string": new}
        self._call(text or f"Now I edit {path}.", "edit_file", args, f"Edited {path}: replaced 1 occurrence.")

    def _error(self) -> None:
        self._facts += 1
        n = self._facts
        path = self.rng.choice(self.written)
        command = f"pytest tests/{self.rng.choice(_AREAS)} -q -k case_{n}"
        error = self.rng.choice(_ERRORS).format(n=n)
        output = f"FAILED tests/test_case_{n}.py::test_case_{n} - {error}\n1 failed, 12 passed in 0.84s"
        self._call("Running the tests.", "run_tests", {"command": command}, output, outcome="failed")
        fix = f"{self.rng.choice(_FIXES)} in {path}"
        self._edit(path, f"return event or {{}}  # fix {n}", f"The tests fail with {error}. Fix: {fix}.")
        self._call("Running the tests again.", "run_tests", {"command": command}, "13 passed in 0.91s")
        self.probes.append(Probe("errors", f"Which error did `{command}` fail with?", error))
        self.probes.append(Probe("errors", f"How was the failure of `{command}` fixed?", fix))

    def _retry(self) -> None:
        self._facts += 1
        path = self.rng.choice(self.written)
        missing = f"def handler_v{self._facts}(event):"
        args = {"path": path, "old_string": missing, "new_string": "def handler(event):"}
        error = f"old_string not found in {path}: no line matches '{missing}'. Read the file and copy the exact text."
        self._call(f"Renaming the handler in {path}.", "edit_file", args, error, outcome="retried")
        expected = f"no line matches '{missing}'"
        self.probes.append(Probe("errors", f"Why did an edit of {path} have to be retried?", expected))
        self._read()

    def _todo_update(self, add: int = 0) -> None:
        for item in self.todos:
            if item["status"] == "in_progress":
                item["status"] = "completed"
                break
        add = add or (self.rng.random() < 0.6) + (self.rng.random() < 0.3)
        for _ in range(add):
            content = self._unique(lambda: f"{self.rng.choice(_TODO_VERBS)} {self._topic()}")
            self.todos.append({"content": content, "status": "pending"})
        while len(self.todos) > _MAX_TODOS and self.todos[0]["status"] == "completed":
            self.todos.pop(0)
        pending = [t for t in self.todos if t["status"] == "pending"]
        if pending and self.rng.random() < 0.8:
            pending[0]["status"] = "in_progress"
        marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
        listing = "\n".join(f"{i}. {marks[t['status']]} {t['content']}" for i, t in enumerate(self.todos, 1))
        done = sum(t["status"] == "completed" for t in self.todos)
        result = f"Todo list updated ({done}/{len(self.todos)} completed):\n{listing}"
        todos = [dict(t) for t in self.todos]
        self._call("Updating the plan.", "write_todos", {"todos": todos}, result)

    def _turn(self) -> None:
        topic = self._unique(self._topic)
        choice = self.rng.choice(_CHOICES)
        text = f"Done for now. Decision: we use {choice} for {topic}, because {self.rng.choice(_REASONS)}."
        self.messages.append(ModelResponse(parts=[TextPart(text)]))
        self.messages.append(ModelRequest(parts=[UserPromptPart(f"Thanks. Next: {self._task()}")]))
        self.probes.append(Probe("decisions", f"What did we decide to use for {topic}?", f"{choice} for {topic}"))

    def _latest_request(self) -> None:
        self.messages.append(ModelResponse(parts=[TextPart("That part is finished; the tests pass.")]))
        area = self.rng.choice(_AREAS)
        paragraphs = [
            f"New request (ref R-{self.seed}-{len(self.messages)}): the {area} dashboard shows stale numbers after "
            "a deploy, see the attached screenshot.",
            *(
                f"Step {i}: check {self._topic()} and make sure it reads fresh data; if it caches, invalidate on "
                f"deploy and add a regression test named test_fresh_{area}_{i}."
                for i in range(1, 9)
            ),
            "Do not change the public API, keep every existing test passing, and tell me what you changed.",
        ]
        text = "\n\n".join(paragraphs)
        image = ImageUrl(f"https://example.com/screenshots/session-{self.seed}/{area}-dashboard.png")
        self.messages.append(ModelRequest(parts=[UserPromptPart([text, image])]))
