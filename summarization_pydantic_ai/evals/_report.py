"""`ProbeReport`: per-category scores, the overall score, the failing probes, and a readable table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._probes import CATEGORIES, ProbeResult

__all__ = ["CategoryScore", "ProbeReport"]


@dataclass(frozen=True)
class CategoryScore:
    """How many probes of one category were answerable, and where their answers were found."""

    category: str
    probes: int
    working: int
    """Answered by the compacted working history itself."""
    rehydration: int
    """Answered only by the originals rehydration returned."""

    @property
    def answered(self) -> int:
        return self.working + self.rehydration

    @property
    def score(self) -> float:
        """The fraction answerable (working history plus rehydration); 1.0 for a category with no probes."""
        return self.answered / self.probes if self.probes else 1.0


@dataclass(frozen=True)
class ProbeReport:
    """The outcome of [`run_probes`][summarization_pydantic_ai.evals.run_probes]: `str(report)` is a table.

    Scores are fractions (0.75 means 75%) of probes answerable from the compacted working history plus what
    rehydration returned; `working_score` counts the working history alone.
    """

    results: list[ProbeResult]
    strategy: str = "compaction"
    """A name for the compaction path (the callable's qualified name by default)."""
    session: str = "session"
    messages_before: int = 0
    messages_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    problems: list[str] = field(default_factory=list[str])
    """What `validate_history` found wrong with the compacted history (a provider would reject it)."""

    def categories(self) -> list[CategoryScore]:
        """One score per category: the built-in categories first, in their order, then any others by name."""
        names = {r.probe.category for r in self.results}
        ordered = [c for c in CATEGORIES if c in names] + sorted(names - set(CATEGORIES))
        return [_count(name, [r for r in self.results if r.probe.category == name]) for name in ordered]

    def category_scores(self) -> dict[str, float]:
        """`{category: score}` for every category that has probes."""
        return {c.category: c.score for c in self.categories()}

    def score_of(self, categories: Iterable[str]) -> float:
        """The fraction answerable among the probes of `categories` (1.0 when they have none)."""
        wanted = set(categories)
        chosen = [r for r in self.results if r.probe.category in wanted]
        return sum(r.answerable for r in chosen) / len(chosen) if chosen else 1.0

    @property
    def score(self) -> float:
        """The overall fraction of probes answerable (1.0 when there are no probes)."""
        return sum(r.answerable for r in self.results) / len(self.results) if self.results else 1.0

    @property
    def working_score(self) -> float:
        """The fraction answerable from the working history alone, without rehydration."""
        if not self.results:
            return 1.0
        return sum(r.found_in == "working" for r in self.results) / len(self.results)

    @property
    def failing(self) -> list[ProbeResult]:
        """The probes no text answered."""
        return [r for r in self.results if not r.answerable]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (for CI dashboards): scores, sizes, problems and every probe's outcome."""
        return {
            "strategy": self.strategy,
            "session": self.session,
            "score": self.score,
            "working_score": self.working_score,
            "categories": self.category_scores(),
            "messages": [self.messages_before, self.messages_after],
            "tokens": [self.tokens_before, self.tokens_after],
            "problems": list(self.problems),
            "results": [
                {
                    "category": r.probe.category,
                    "question": r.probe.question,
                    "expected": r.probe.expected,
                    "found_in": r.found_in,
                }
                for r in self.results
            ],
        }

    def __str__(self) -> str:
        return self.table()

    def table(self, max_failing: int = 10) -> str:
        """The report as text: sizes, one row per category, the overall row, and the first failing probes."""
        lines = [
            f"Quality probes: {self.strategy} on {self.session}",
            f"history: {self.messages_before:,} -> {self.messages_after:,} messages, "
            f"{self.tokens_before:,} -> {self.tokens_after:,} tokens (estimated)",
            "",
            f"{'category':<16}{'probes':>8}{'working':>9}{'rehydrated':>12}{'score':>9}",
        ]
        lines += [
            f"{row.category:<16}{row.probes:>8}{row.working:>9}{row.rehydration:>12}{row.score:>9.1%}"
            for row in [*self.categories(), _count("overall", self.results)]
        ]
        if self.problems:
            count = f"{len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}"
            lines += ["", f"invalid history ({count}): {self.problems[0]}"]
        failing = self.failing
        if failing:
            lines += ["", f"failing probes ({len(failing)}):"]
            for result in failing[:max_failing]:
                expected = _short(result.probe.expected, 70)
                lines.append(f"  [{result.probe.category}] {_short(result.probe.question, 70)} -> {expected!r}")
            if len(failing) > max_failing:
                lines.append(f"  ... {len(failing) - max_failing} more")
        return "\n".join(lines)


def _count(name: str, results: list[ProbeResult]) -> CategoryScore:
    working = sum(r.found_in == "working" for r in results)
    rehydration = sum(r.found_in == "rehydration" for r in results)
    return CategoryScore(name, len(results), working, rehydration)


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
