"""Units and scores: which messages move together, and how much each group is worth keeping.

A unit is what the pruner keeps or drops whole: a response with tool calls together with every request holding
their results (any outcome), or a single message. Each unit is scored from features a reader of the history would
weigh: an error (a failed or retried tool result, an error in its text), a state change (a call to a tool that
changes the world: writes, clicks, form input), a user instruction (a user prompt), how recent it is, and how often
later messages refer back to it (a path, URL or element ref it introduced, mentioned again later).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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

from .._messages import ToolPairIndex
from .._render import part_text

__all__ = [
    "DEFAULT_STATE_CHANGE_TOOLS",
    "ImportanceScore",
    "ImportanceWeights",
    "Unit",
    "build_units",
    "score_units",
]

DEFAULT_STATE_CHANGE_TOOLS: tuple[str, ...] = (
    "write*",
    "edit*",
    "create*",
    "delete*",
    "remove*",
    "move*",
    "rename*",
    "*click*",
    "*type*",
    "*fill*",
    "*navigate*",
    "*submit*",
    "*select*",
    "*press*",
    "*upload*",
    "*todos*",
)
"""Tool-name patterns (`fnmatch`, case-insensitive) of calls that change state: files, pages, forms, the plan."""

_ERROR_OUTCOMES = ("failed", "retried")
_ERROR_TEXT = re.compile(r"\b(?:error|exception|traceback|failed|failure)\b", re.IGNORECASE)
_SCAN_CHARS = 4_000
"""Error words are looked for in the head and tail of a text only: a 1 MB tool output costs the same as 8 KB."""
_URL = re.compile(r"https?://[^\s\"'<>)\]]+")
_REF = re.compile(r"\bref[=:]\s*[\"']?([\w-]+)")  # accessibility-tree element refs: ref=e12, ref: "e12"
_D = r"\s\"'`()\[\]{}<>,;="  # what ends a path in text, JSON or markup
_SLASHED = re.compile(rf"(?<![^{_D}])[^{_D}/]*+/[^{_D}]*+")
_PATH = re.compile(r"/?(?:[\w.-]+/)+[\w-]+\.\w{1,8}")
# Paths are looked for only in the whitespace-separated chunks that hold a slash, from word starts, with possessive
# runs: a pattern searching the whole text backtracks over every word (it was most of the cost of scoring).
_MAX_KEYS_PER_MESSAGE = 200


@dataclass(frozen=True)
class ImportanceWeights:
    """How much each feature adds to a unit's score (each feature counts once per unit)."""

    error: float = 3.0
    """A failed or retried tool result, a retry prompt, or an error word in a result or answer."""
    state_change: float = 2.0
    """A call to a tool matching the pruner's `state_change_tools`."""
    user_instruction: float = 4.0
    """A user prompt."""
    recency: float = 2.0
    """Scaled by position: 0 for the oldest unit, the full weight for the newest."""
    reference: float = 1.0
    """Per later message that mentions a path, URL or element ref this unit introduced (up to `max_references`)."""
    max_references: int = 3

    def __post_init__(self) -> None:
        for name in ("error", "state_change", "user_instruction", "recency", "reference"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"ImportanceWeights.{name} must be a number >= 0, got {value!r}")
        if isinstance(self.max_references, bool) or not isinstance(self.max_references, int) or self.max_references < 0:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"ImportanceWeights.max_references must be an int >= 0, got {self.max_references!r}")


@dataclass(frozen=True)
class ImportanceScore:
    """The score of one unit (messages kept or dropped together), as `ImportancePruner.score` reports it."""

    indices: tuple[int, ...]
    """The message indices of the unit, ascending."""
    score: float
    tokens: int
    reasons: tuple[str, ...]
    """The features that scored: `'error'`, `'state_change'`, `'user_instruction'`, `'referenced'`."""
    must_keep: bool
    """Never dropped: the first instructions, the latest user request and exchange, a summary, the predicate."""
    references: int = 0
    """How many later messages mention something this unit introduced."""


@dataclass
class Unit:
    indices: tuple[int, ...]
    has_calls: bool


def build_units(messages: Sequence[ModelMessage]) -> list[Unit]:
    """The units of `messages` in order of their first message: every tool call with all of its results."""
    index = ToolPairIndex.build(messages)
    parent = list(range(len(messages)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for call_id, at in index.calls.items():
        for result_at in index.results.get(call_id, ()):
            a, b = find(at), find(result_at)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(len(messages)):
        groups.setdefault(find(i), []).append(i)
    units = [
        Unit(tuple(members), any(isinstance(messages[i], ModelResponse) for i in members) and len(members) > 1)
        for members in groups.values()
    ]
    units.sort(key=lambda u: u.indices[0])
    return units


def _scan(text: str) -> str:
    return text if len(text) <= 2 * _SCAN_CHARS else text[:_SCAN_CHARS] + "\n" + text[-_SCAN_CHARS:]


def _part_is_error(part: object) -> bool:
    if isinstance(part, RetryPromptPart):  # pyright: ignore[reportDeprecated]
        return True
    if isinstance(part, ToolReturnPart):
        return part.outcome in _ERROR_OUTCOMES or _ERROR_TEXT.search(_scan(part_text(part))) is not None
    return isinstance(part, TextPart) and _ERROR_TEXT.search(_scan(part.content)) is not None


def _is_error(message: ModelMessage) -> bool:
    return any(_part_is_error(part) for part in message.parts)


@functools.lru_cache(maxsize=32)
def _state_change_matcher(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One case-insensitive regular expression for every pattern (`fnmatch` per name and pattern was slow)."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns), re.IGNORECASE)


def _changes_state(message: ModelMessage, matcher: re.Pattern[str] | None) -> bool:
    if matcher is None or not isinstance(message, ModelResponse):
        return False
    return any(matcher.match(p.tool_name) for p in message.parts if isinstance(p, ToolCallPart))


def _is_user_instruction(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts)


def _text_keys(text: str, keys: set[str]) -> None:
    if "http" in text:
        keys.update(url.rstrip(".,;:") for url in _URL.findall(text))
    if "ref" in text:
        keys.update("ref=" + ref for ref in _REF.findall(text))
    if "/" in text:
        slashed = (found for chunk in text.split() if "/" in chunk for found in _SLASHED.findall(chunk))
        words = (word.rstrip(".:") for word in slashed if not word.startswith("http"))
        keys.update(word for word in words if _PATH.fullmatch(word))


def _reference_keys(message: ModelMessage) -> set[str]:
    keys: set[str] = set()
    for part in message.parts:
        _text_keys(_scan(part_text(part)), keys)
        if len(keys) >= _MAX_KEYS_PER_MESSAGE:
            break
    return keys


def count_references(messages: Sequence[ModelMessage], unit_of: Sequence[int]) -> list[int]:
    """For each unit, how many later messages (of other units) mention a key the unit introduced first."""
    introduced: dict[str, int] = {}
    counts = [0] * (max(unit_of, default=-1) + 1)
    for i, message in enumerate(messages):
        unit = unit_of[i]
        credited: set[int] = set()
        for key in _reference_keys(message):
            owner = introduced.setdefault(key, unit)
            if owner != unit and owner not in credited:
                credited.add(owner)
                counts[owner] += 1
    return counts


def score_units(
    messages: Sequence[ModelMessage],
    units: Sequence[Unit],
    *,
    weights: ImportanceWeights,
    state_change_tools: Sequence[str],
    tokens: Callable[[ModelMessage], int],
    must_keep: Callable[[Unit], bool],
) -> list[ImportanceScore]:
    """One `ImportanceScore` per unit, in unit order."""
    unit_of = [0] * len(messages)
    for u, unit in enumerate(units):
        for i in unit.indices:
            unit_of[i] = u
    references = count_references(messages, unit_of) if weights.reference else [0] * len(units)
    matcher = _state_change_matcher(tuple(state_change_tools))
    last = max(len(units) - 1, 1)
    scores: list[ImportanceScore] = []
    for u, unit in enumerate(units):
        members = [messages[i] for i in unit.indices]
        reasons: list[str] = []
        score = weights.recency * u / last
        if any(_is_error(m) for m in members):
            reasons.append("error")
            score += weights.error
        if any(_changes_state(m, matcher) for m in members):
            reasons.append("state_change")
            score += weights.state_change
        if any(_is_user_instruction(m) for m in members):
            reasons.append("user_instruction")
            score += weights.user_instruction
        if references[u]:
            reasons.append("referenced")
            score += weights.reference * min(references[u], weights.max_references)
        size = sum(tokens(m) for m in members)
        scores.append(
            ImportanceScore(unit.indices, round(score, 6), size, tuple(reasons), must_keep(unit), references[u])
        )
    return scores
