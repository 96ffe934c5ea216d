"""The matching rules every backend's `grep` shares, bounded in time.

Patterns are compiled with the `regex` package (Python `re` syntax, `regex.V0`), whose matching functions take a
`timeout`: a pattern that backtracks catastrophically (`(a+)+$` on a long line of `a`s) cannot hang a run. A search
stops early, with `GrepStopped` carrying the matches found so far and saying why, when

- one line takes longer than `GREP_LINE_TIMEOUT` seconds to match,
- after `GREP_SLOW_AFTER` seconds spent matching, the pattern has matched slower than `GREP_MIN_RATE` characters
  and 100,000 lines per second (an ordinary pattern runs at tens of millions of characters, a million lines), or
- the whole search, reading files included, has taken `GREP_TIME_LIMIT` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

import regex

from ._protocol import BackendError, GrepMatch, match_glob

__all__ = [
    "GREP_LINE_TIMEOUT",
    "GREP_MIN_RATE",
    "GREP_SLOW_AFTER",
    "GREP_TIME_LIMIT",
    "GrepBudget",
    "GrepStopped",
    "compile_grep_pattern",
    "grep_lines",
    "grep_path_matches",
]

GREP_LINE_TIMEOUT = 0.5
"""Seconds one line may take to match."""
GREP_SLOW_AFTER = 0.5
"""Seconds of matching after which a pattern slower than `GREP_MIN_RATE` is stopped."""
GREP_MIN_RATE = 1_000_000
"""Characters per second a pattern must match at, once it has matched for `GREP_SLOW_AFTER` seconds."""
_MIN_LINE_RATE = 100_000
_LITERAL = regex.compile(r"[\w \-:,;'\"=<>@#%&/!~`]+")
"""Patterns made only of these characters match themselves: searched with `in`, no regular expression needed."""
GREP_TIME_LIMIT = 30.0
"""Seconds a whole `grep` may take (reading the files included)."""


class GrepStopped(BackendError):
    """`grep` stopped early: `matches` holds what it found until then and the message says why and what to do."""

    def __init__(self, message: str, matches: list[GrepMatch]) -> None:
        super().__init__(message)
        self.matches = matches


@dataclass
class GrepBudget:
    """The time one `grep` may use; shared by every file it searches. `stopped` says why it ended early."""

    time_limit: float = GREP_TIME_LIMIT
    line_timeout: float = GREP_LINE_TIMEOUT
    slow_after: float = GREP_SLOW_AFTER
    min_rate: float = GREP_MIN_RATE
    started: float = field(default_factory=time.monotonic)
    matching: float = 0.0
    """Seconds spent matching so far."""
    scanned: int = 0
    """Characters matched against so far."""
    lines: int = 0
    """Lines matched against so far."""
    stopped: str | None = None

    def expired(self) -> bool:
        """Whether the search must stop now (and `stopped` says why)."""
        if self.stopped is None and time.monotonic() - self.started > self.time_limit:
            self.stopped = (
                f"grep stopped after {self.time_limit:g} s (the time limit of a search): the matches above are those "
                "found until then; narrow the path or glob to search fewer files"
            )
        return self.stopped is not None

    def too_slow(self) -> bool:
        """Whether matching has gone slower than `min_rate` characters and 100,000 lines per second."""
        return self.scanned < self.matching * self.min_rate and self.lines < self.matching * _MIN_LINE_RATE

    def raise_if_stopped(self, matches: list[GrepMatch]) -> None:
        if self.stopped is not None:
            raise GrepStopped(self.stopped, matches)

    def stop_slow(self, pattern: str, why: str) -> None:
        """Stop the search because `pattern` is too slow (`why`)."""
        self.stopped = (
            f"grep stopped early: the pattern {pattern!r} {why} (nested quantifiers such as (a+)+ or (.*)* make a "
            "regular expression backtrack without end). The matches above are those found until then; simplify "
            "the pattern, e.g. remove the nested repetition, or search a smaller path"
        )


def grep_path_matches(glob: str | None, path: str, base: str = "/") -> bool:
    """The file filter of `grep`: no glob matches everything; a glob without `/` (`*.py`) is matched against the
    file name at any depth (like ripgrep's `--glob`); one with `/` is matched like `match_glob`."""
    if glob is None or glob == "":
        return True
    if "/" not in glob:
        return fnmatchcase(path.rsplit("/", 1)[-1], glob)
    return match_glob(glob, path, base)


def compile_grep_pattern(pattern: str, *, ignore_case: bool = False) -> regex.Pattern[str]:
    """`pattern` compiled (Python `re` syntax, by the `regex` package), or a `BackendError` saying how to fix it."""
    try:
        return regex.compile(pattern, regex.V0 | (regex.IGNORECASE if ignore_case else 0))
    except (regex.error, ValueError, OverflowError, RecursionError) as exc:
        raise BackendError(
            f"invalid regular expression {pattern!r}: {exc}. Escape special characters such as ( [ {{ . * + ? with a "
            "backslash to search for them literally."
        ) from exc


def grep_lines(
    compiled: regex.Pattern[str], path: str, text: str, limit: int, *, budget: GrepBudget | None = None
) -> Iterator[GrepMatch]:
    """The first `limit` lines of `text` that `compiled` matches (searched with `search`), as `GrepMatch`es.

    With a `budget`, matching is bounded in time: when it runs out, the generator ends and `budget.stopped` says why.
    """
    if limit <= 0:
        return
    budget = GrepBudget() if budget is None else budget
    if budget.expired():
        return
    if _LITERAL.fullmatch(compiled.pattern) and not compiled.flags & regex.IGNORECASE:
        yield from _grep_literal(compiled.pattern, path, text, limit, budget)
        return
    search, timeout = compiled.search, budget.line_timeout
    deadline = budget.started + budget.time_limit
    found = 0
    last = time.monotonic()
    for number, line in enumerate(text.split("\n"), start=1):
        try:
            hit = search(line, timeout=timeout)
        except TimeoutError:
            budget.matching += time.monotonic() - last
            budget.stop_slow(compiled.pattern, f"took over {timeout:g} s on line {number} of {path}")
            return
        now = time.monotonic()
        budget.matching += now - last
        budget.scanned += len(line) + 1
        budget.lines += 1
        if hit is not None:
            yield GrepMatch(path, number, line.removesuffix("\r"))
            found += 1
            if found >= limit:
                return
            now = time.monotonic()  # the consumer's time is not matching time
        last = now
        if now > deadline and budget.expired():
            return
        if budget.matching > budget.slow_after and budget.too_slow():
            rate = budget.scanned / budget.matching
            budget.stop_slow(compiled.pattern, f"matched only {rate:,.0f} characters per second")
            return


def _grep_literal(literal: str, path: str, text: str, limit: int, budget: GrepBudget) -> Iterator[GrepMatch]:
    """`grep_lines` for a pattern that is plain text: the same matches, found with `str.find` (linear time)."""
    found, start = 0, text.find(literal)
    number, counted = 1, 0
    while start >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        number, counted = number + text.count("\n", counted, line_start), line_start
        yield GrepMatch(path, number, text[line_start:line_end].removesuffix("\r"))
        found += 1
        if found >= limit or budget.expired():
            return
        start = text.find(literal, line_end)
