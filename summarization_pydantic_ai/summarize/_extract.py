"""One pass over a span: the facts the deterministic summary keeps.

- Decisions: the final answer of each turn (a response with text and no tool call: the run ended there), condensed
  to its first sentence and the sentences that state a choice or a result, and every sentence elsewhere in the
  assistant's text that states a choice (`_sentences.is_choice`).
- Errors and their fixes: a failed tool call (an outcome other than success, a retry prompt, or an output with an
  error signature) with its headline; it is fixed by the next successful call of the same tool (of the same file,
  for a tool that changes files), explained by the assistant's first words after the failure, and shown by what
  that call changed (the part of its arguments that differs from the failed call's).
- Files touched with their last action, the latest todo list, the user's requests, next steps, the questions the
  final answers asked, and how often each tool ran.

Every entry carries the id of the message it came from. The pass is O(span): a tool output is read at its ends.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from .._artifacts import changed_path, todo_items, tool_args
from .._messages import get_message_id
from .._render import part_text
from ._sentences import choice_sentences, failure_headline, key_sentences, looks_failed, sentences
from ._validate import call_paths, find_paths

__all__ = ["ANSWER_CHARS", "INTENT_CHARS", "Facts", "Failure", "FileTrail", "extract", "one_line"]

ANSWER_CHARS = 240
INTENT_CHARS = 200
_NEXT_STEP = re.compile(r"^\s*(?:[-*]\s*\[ \]|(?:next|todo|then|remaining)\b[:\s])", re.IGNORECASE)
_OPEN_FAILURES = 32
"""Unfixed failures a later call may still fix (the most recent ones): a fix comes soon after its failure, and the
bound keeps the pass O(span) when a session fails thousands of times."""
_TARGET_KEYS = ("path", "file_path", "filename", "file", "command", "cmd", "query", "url", "code", "sql", "pattern")


def one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class _Call:
    tool: str
    label: str
    path: str | None
    detail: str
    """The call's main argument (a command, a query, code, a path), whole, on one line."""
    changes: bool


@dataclass
class Failure:
    """A failed tool call and, once found, what fixed it."""

    tool: str
    label: str
    headline: str
    call: _Call
    count: int = 1
    explanation: str | None = None
    fix: str | None = None
    fixed_at: str | None = None
    changed: list[str] = field(default_factory=list[str])
    """Files changed between the failure and the fix."""


@dataclass
class FileTrail:
    """A file tool calls touched: the tools in the order of their last use (the last is the last action), those
    that changed it, and the message of the last one."""

    tools: list[str]
    changers: list[str]
    label: str


@dataclass
class Facts:
    requests: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    decisions: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    failures: list[Failure] = field(default_factory=list[Failure])
    files: dict[str, FileTrail] = field(default_factory=dict[str, FileTrail])
    mentioned: dict[str, str] = field(default_factory=dict[str, str])
    todos: tuple[str, list[tuple[str, str]]] | None = None
    tools: Counter[str] = field(default_factory=Counter[str])
    next_steps: list[str] = field(default_factory=list[str])
    questions: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    last_text: str | None = None


def _detail(part: ToolCallPart) -> str:
    args = tool_args(part)
    value = next((args[k] for k in _TARGET_KEYS if isinstance(args.get(k), str) and args[k].strip()), None)
    if value is None:
        value = next((v for v in args.values() if isinstance(v, str) and v.strip()), "")
    return " ".join(str(value).split())


def _touched(part: ToolCallPart) -> tuple[list[str], str | None]:
    """The paths a call operates on (as `touched_paths` finds them), and the one it changes, if any."""
    changed = changed_path(part)
    paths = call_paths(part)
    if changed is not None and changed not in paths:
        paths.insert(0, changed)
    return paths, changed


_EXCEPTION = re.compile(r"[\w.]*(?:Error|Exception)\b.*")


def explanation(text: str, headline: str, limit: int = 240) -> str | None:
    """What the assistant said right after a failure, less the sentences that only repeat the error."""
    core = _EXCEPTION.search(headline)
    error = " ".join((core[0] if core else headline.rsplit(" - ", 1)[-1]).lower().split())
    kept = [s for s in sentences(text) if not (error and error in s.lower())]
    return key_sentences(" ".join(kept), limit) if kept else None


def difference(before: str, after: str, width: int = 120) -> str:
    """The part of `after` where it starts to differ from `before` (with some context), on one line."""
    if len(after) <= width:
        return after
    common = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        common += 1
    start = max(min(common - width // 4, len(after) - width), 0)
    excerpt = after[start : start + width]
    return ("…" if start else "") + excerpt + ("…" if start + width < len(after) else "")


class _Pass:
    def __init__(self, first_index: int) -> None:
        self.facts = Facts()
        self.first_index = first_index
        self.calls: dict[str, _Call] = {}
        self.open: deque[Failure] = deque(maxlen=_OPEN_FAILURES)
        self.awaiting_words: list[Failure] = []

    def message(self, message: ModelMessage, index: int) -> None:
        label = get_message_id(message) or f"#{self.first_index + index}"
        if isinstance(message, ModelResponse):
            self.response(message, label)
        else:
            self.request(message, label)

    def response(self, message: ModelResponse, label: str) -> None:
        text = "\n".join(p.content for p in message.parts if isinstance(p, TextPart) and p.content.strip())
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        if text:
            self.text(text, label, final=not calls)
        for part in calls:
            self.call(part, label)

    def text(self, text: str, label: str, *, final: bool) -> None:
        facts = self.facts
        facts.last_text = text
        for failure in self.awaiting_words:
            failure.explanation = explanation(text, failure.headline)
        self.awaiting_words = []
        if final:
            facts.decisions.append((key_sentences(text, ANSWER_CHARS), label))
            facts.questions.extend((s, label) for s in sentences(text) if s.endswith("?"))
        else:
            facts.decisions.extend((one_line(s, ANSWER_CHARS), label) for s in choice_sentences(text))
        facts.next_steps.extend(line.strip() for line in text.splitlines() if _NEXT_STEP.match(line))
        for path in find_paths(text):
            facts.mentioned.setdefault(path, label)

    def call(self, part: ToolCallPart, label: str) -> None:
        facts = self.facts
        facts.tools[part.tool_name] += 1
        self.awaiting_words = []  # a call with no words before it: the fix was not explained
        paths, changed = _touched(part)
        for path in paths:
            trail = facts.files.pop(path, None) or FileTrail([], [], label)
            trail.tools = [t for t in trail.tools if t != part.tool_name] + [part.tool_name]
            if path == changed and part.tool_name not in trail.changers:
                trail.changers.append(part.tool_name)
            trail.label = label
            facts.files[path] = trail  # re-inserted: the dict is in the order of last use
        if changed is not None:
            for failure in self.open:  # a change made while a failed run (a call that changes nothing) is open
                if not failure.call.changes and changed not in failure.changed:
                    failure.changed.append(changed)
        items = todo_items(part)
        if items is not None:
            facts.todos = (label, items)
        path = changed or (paths[0] if paths else None)
        self.calls[part.tool_call_id] = _Call(part.tool_name, label, path, _detail(part), changed is not None)

    def request(self, message: ModelRequest, label: str) -> None:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                self.facts.requests.append((one_line(part_text(part), INTENT_CHARS), label))
                for path in find_paths(part_text(part)):
                    self.facts.mentioned.setdefault(path, label)
            elif isinstance(part, ToolReturnPart):
                content = part.content if isinstance(part.content, str) else part_text(part)
                failed = part.outcome != "success" or looks_failed(content)
                self.result(part.tool_call_id, part.tool_name, content, label, failed=failed)
            elif isinstance(part, RetryPromptPart):  # pyright: ignore[reportDeprecated]
                content = part_text(part)
                self.result(part.tool_call_id, part.tool_name or "output", content, label, failed=True)

    def result(self, call_id: str, tool: str, content: str, label: str, *, failed: bool) -> None:
        call = self.calls.get(call_id) or _Call(tool, label, None, "", False)
        if failed:
            self.failed(call, content, label)
        else:
            self.succeeded(call, label)

    def failed(self, call: _Call, content: str, label: str) -> None:
        headline = failure_headline(content) or "failed"
        for failure in self.open:
            if failure.tool == call.tool and failure.headline == headline:  # the same failure again, still unfixed
                failure.count += 1
                failure.label = label
                return
        failure = Failure(call.tool, label, headline, call)
        self.facts.failures.append(failure)
        self.open.append(failure)
        self.awaiting_words.append(failure)

    def succeeded(self, call: _Call, label: str) -> None:
        for failure in list(self.open):
            if failure.tool != call.tool:
                continue
            if call.changes and failure.call.path not in (None, call.path):
                continue  # a change to another file does not fix this one
            failure.fix = difference(failure.call.detail, call.detail) if call.detail else call.tool
            failure.fixed_at = label
            self.open.remove(failure)


def extract(messages: Sequence[ModelMessage], first_index: int = 0) -> Facts:
    """The facts of a span (see the module docstring); `first_index` labels messages without an id."""
    extraction = _Pass(first_index)
    for index, message in enumerate(messages):
        extraction.message(message, index)
    return extraction.facts
