"""Probes: a question about a session, its expected answer, and how to find that answer in rendered text.

Scoring is deterministic string matching over the rendered messages (`render_messages`): a probe is answerable
when its expected answer appears in the text, case and whitespace ignored, or one of its patterns matches. No
model judges anything, so a score changes only when the compacted history does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

__all__ = [
    "ARTIFACT_CATEGORIES",
    "CATEGORIES",
    "FoundIn",
    "Probe",
    "ProbeResult",
    "normalize",
    "normalize_lines",
    "todo_patterns",
]

CATEGORIES = ("file_paths", "todo_state", "last_request", "decisions", "errors")
"""The categories of the built-in probes, in report order (your own probes may use any category name)."""
ARTIFACT_CATEGORIES = ("file_paths", "todo_state", "last_request")
"""The artifact trail: what an agent must never lose (files it touched, its todo list, the user's last request)."""

FoundIn = Literal["working", "rehydration"]


def normalize(text: str) -> str:
    """Lower case, every run of whitespace one space: what an expected answer is compared with."""
    return " ".join(text.split()).lower()


def normalize_lines(text: str) -> str:
    """Lower case, every run of spaces one space, line breaks kept: what patterns are matched against."""
    return "\n".join(" ".join(line.split()) for line in text.lower().splitlines())


@dataclass(frozen=True)
class Probe:
    """One question about a session and the answer a reader must be able to find after compaction.

    Example:
        ```python
        Probe('decisions', 'Which database did we pick for the cache?', 'SQLite in WAL mode')
        ```
    """

    category: str
    """A group name for the report, e.g. `file_paths` or your own."""
    question: str
    expected: str
    """The answer. The probe is answerable when this text appears (case and whitespace ignored), unless
    `patterns` is given."""
    patterns: tuple[str, ...] = ()
    """Regular expressions; when given, the probe is answerable if any of them matches, and `expected` is only
    shown in the report. They are matched against the lower-cased text with runs of spaces collapsed and line
    breaks kept (`^` and `$` match at every line)."""

    def __post_init__(self) -> None:
        if not self.category or not self.question.strip() or not self.expected.strip():
            raise ValueError(f"a probe needs a category, a question and an expected answer, got {self!r}")
        for pattern in self.patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"probe {self.question!r}: invalid pattern {pattern!r}: {exc}") from exc

    @cached_property
    def _compiled(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p, re.IGNORECASE | re.MULTILINE) for p in self.patterns)

    def answered_by(self, text: str | _Text) -> bool:
        """Whether `text` (e.g. `render_messages(history)`) answers this probe."""
        if isinstance(text, str):
            text = _Text(text)
        if self.patterns:
            return any(p.search(text.lines) for p in self._compiled)
        return normalize(self.expected) in text.flat


class _Text:
    """A text in both matching forms, each computed once however many probes read it."""

    def __init__(self, text: str) -> None:
        self._raw = text

    @cached_property
    def flat(self) -> str:
        return normalize(self._raw)

    @cached_property
    def lines(self) -> str:
        return normalize_lines(self._raw)


@dataclass(frozen=True)
class ProbeResult:
    """A probe and where its answer was found: in the compacted working history, in what rehydration returned,
    or nowhere (`found_in is None`)."""

    probe: Probe
    found_in: FoundIn | None

    @property
    def answerable(self) -> bool:
        return self.found_in is not None


def score(probes: Sequence[Probe], working_text: str, rehydrated_text: str = "") -> list[ProbeResult]:
    """Check every probe against the rendered working history first, then against the rehydrated originals."""
    working, rehydrated = _Text(working_text), _Text(rehydrated_text)
    results: list[ProbeResult] = []
    for probe in probes:
        found: FoundIn | None = None
        if probe.answered_by(working):
            found = "working"
        elif rehydrated_text and probe.answered_by(rehydrated):
            found = "rehydration"
        results.append(ProbeResult(probe, found))
    return results


_MARKS = {"completed": r"\[x\]", "in_progress": r"\[[~/-]\]", "pending": r"\[ \]"}
_WORDS = {"completed": r"(?:completed|done)", "in_progress": r"in[_ -]progress", "pending": r"(?:pending|not started)"}


def todo_patterns(content: str, status: str) -> tuple[str, ...]:
    """The common ways a todo item and its status are written: the `write_todos` (or `update_plan`) arguments as
    JSON, a checkbox line (`[x] content`, as `render_todos` and the deterministic summary write it) or prose
    (`content (done)`)."""
    item, raw = re.escape(normalize(content)), re.escape(normalize(status))
    word = _WORDS.get(status, raw)
    key = r'"(?:content|step|title|task|description)"'  # the item's text, as todo and plan tools name it
    patterns = [
        rf'{key}: ?"{item}", ?"status": ?"{raw}"',
        rf'"status": ?"{raw}", ?{key}: ?"{item}"',
        rf"{item} ?[(:—–-] ?{word}(?!\w)",
    ]
    if status in _MARKS:  # the checkbox line ends with the item (or a parenthesis after it)
        patterns.append(rf"{_MARKS[status]} {item}(?: \([^()\n]*\))?[ .]*$")
    return tuple(patterns)
