"""Console and log compression for the working context: the head (the commands run) and the tail (verbatim), every
error line (tracebacks whole or condensed) and each distinct warning once with its count; runs of repeated lines
collapse to one line and a count wherever they are outside the tail, and every gap says how many lines it stands
for and which."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ._common import fmt_int, plural, split_lines
from ._log import DIGITS, TRACEBACK, canonical_line, classify_line, is_frame_line, traceback_end
from ._result import MARK, CompressionResult, finish, is_compressed, unchanged

__all__ = ["compress_log"]

_MAX_LINE = 500
"""A kept line longer than this keeps both ends."""
_TRACEBACK_WHOLE = 30
"""A traceback up to this many lines is kept whole; a longer one keeps its first 5 and last 20 lines."""
_FRAMES = 10
"""Stack frames kept under an error line (JavaScript, Java)."""
_MIN_RUN = 3
"""Runs of at least this many similar lines (digits aside) among kept lines collapse to the first line and a
count."""
_MIN_GAP_RUN = 10
"""A run of at least this many similar lines among the dropped ones is shown the same way instead of vanishing
into a gap (a line repeated 1,000 times says what the gap was)."""
_MAX_GAP_RUNS = 50
"""At most this many runs are shown from the dropped lines (the longest; the header counts the others)."""


def _clip(line: str) -> str:
    if len(line) <= _MAX_LINE:
        return line
    return line[: _MAX_LINE // 2] + f" … ({fmt_int(len(line) - _MAX_LINE)} chars) … " + line[-_MAX_LINE // 2 :]


@dataclass(slots=True)
class _Plan:
    """Which lines to keep, and what the kept warnings and the dropped lines were."""

    lines: Sequence[str]
    keep: set[int] = field(default_factory=set[int])
    errors: int = 0
    warnings: dict[str, list[int]] = field(default_factory=dict[str, list[int]])
    errors_over: int = 0
    error_at: set[int] = field(default_factory=set[int])
    """Every error line's index (kept or not): errors only collapse with identical lines."""
    tail_start: int = 0
    """The index of the first of the last `tail` lines, kept verbatim."""
    runs: dict[int, int] = field(default_factory=dict[int, int])
    """The runs shown collapsed: start index -> end index (exclusive)."""
    runs_over: int = 0

    def scan(self, head: int, tail: int, max_errors: int, max_warnings: int) -> None:
        lines, n = self.lines, len(self.lines)
        self.tail_start = max(0, n - tail)
        self.keep.update(range(min(head, n)))
        self.keep.update(range(self.tail_start, n))
        i = 0
        while i < n:
            line = lines[i]
            if "Traceback" in line and TRACEBACK.match(line):
                end = traceback_end(lines, i)
                self.errors += 1
                self._keep_traceback(i, end)
                i = end + 1
                continue
            kind = classify_line(line)
            if kind == "error":
                self.errors += 1
                self.error_at.add(i)
                if self.errors <= max_errors:
                    self.keep.add(i)
                    j = i + 1
                    while j < n and j - i <= _FRAMES and is_frame_line(lines[j]):  # the stack under a JS error
                        self.keep.add(j)
                        j += 1
                else:
                    self.errors_over += 1
            elif kind == "warning":
                seen = self.warnings.setdefault(canonical_line(line), [])
                seen.append(i)
                if len(seen) == 1 and len(self.warnings) <= max_warnings:
                    self.keep.add(i)
            i += 1

    def _keep_traceback(self, start: int, end: int) -> None:
        if end - start < _TRACEBACK_WHOLE:
            self.keep.update(range(start, end + 1))
        else:
            self.keep.update(range(start, start + 5))
            self.keep.update(range(end - 19, end + 1))

    def find_runs(self) -> None:
        """The runs of similar lines before the tail worth collapsing: those with a kept line (from 3 lines on) and
        the longest ones among the dropped lines (from 10 lines on)."""
        lines, keep = self.lines, self.keep
        in_gaps: list[tuple[int, int]] = []
        for start, end in _similar_runs(lines, self.tail_start, self.error_at):
            if end - start < _MIN_RUN:
                continue
            if any(i in keep for i in range(start, end)):
                self.runs[start] = end
            elif end - start >= _MIN_GAP_RUN:
                in_gaps.append((start, end))
        in_gaps.sort(key=lambda run: run[0] - run[1])  # the longest first (the sort is stable: then the earliest)
        self.runs.update(in_gaps[:_MAX_GAP_RUNS])
        self.runs_over = max(0, len(in_gaps) - _MAX_GAP_RUNS)

    def render(self) -> list[str]:
        """The kept lines and the runs' first lines in order; a run is followed by its count, every gap by one
        line saying which lines it stands for."""
        lines = self.lines
        out: list[str] = []
        previous = -1
        for i in sorted(self.keep.union(self.runs)):
            if i <= previous:  # inside a run already shown
                continue
            if i != previous + 1:
                out.append(f"… {plural(i - previous - 1, 'line')} omitted ({fmt_int(previous + 2)}–{fmt_int(i)}) …")
            out.append(_clip(lines[i]))
            previous = i
            end = self.runs.get(i)
            if end is not None:
                out.append(f"… ×{fmt_int(end - i)} similar lines ({fmt_int(i + 1)}–{fmt_int(end)})")
                previous = end - 1
        if previous < len(lines) - 1:
            out.append(f"… {plural(len(lines) - 1 - previous, 'line')} omitted …")
        return out


def _run_keys(lines: Sequence[str], stop: int) -> list[str]:
    """What makes `lines[:stop]` similar: each line with its digits masked (a leading timestamp's with them, so
    consecutive lines in one format still compare equal), stripped, its first 200 characters. Masked in one pass
    over the text: a line at a time cost three times as much on a 1 MB log."""
    masked = DIGITS.sub("#", "\n".join(lines[:stop])).split("\n") if stop else []
    return [key.strip()[:200] for key in masked]


def _similar_runs(lines: Sequence[str], stop: int, errors: set[int]) -> list[tuple[int, int]]:
    """The maximal runs (start, end) of consecutive similar lines among `lines[:stop]`: equal with digits aside
    (`_run_keys`), and identical when they are error lines."""
    runs: list[tuple[int, int]] = []
    keys = _run_keys(lines, stop)
    start = 0
    for i in range(1, stop):
        if keys[i] != keys[i - 1] or ((i in errors or i - 1 in errors) and lines[i] != lines[i - 1]):
            runs.append((start, i))
            start = i
    if stop:
        runs.append((start, stop))
    return runs


def _header(plan: _Plan, chars: tuple[int, int], lines: int, head: int, tail: int) -> str:
    warnings = sum(len(at) for at in plan.warnings.values())
    over = f" ({fmt_int(plan.errors_over)} beyond the first kept ones dropped)" if plan.errors_over else ""
    runs_over = f" ({fmt_int(plan.runs_over)} shorter ones left in the gaps)" if plan.runs_over else ""
    return (
        f"{MARK}log: {fmt_int(len(plan.lines))} → {fmt_int(lines)} lines, {fmt_int(chars[0])} → {fmt_int(chars[1])} "
        f"chars; {plural(plan.errors, 'error')} kept{over}, {plural(warnings, 'warning line')} "
        f"({fmt_int(len(plan.warnings))} distinct, each kept once); the first {fmt_int(head)} and last "
        f"{fmt_int(tail)} lines kept, the last verbatim; {plural(len(plan.runs), 'run')} of repeats collapsed"
        f"{runs_over}]"
    )


def compress_log(
    content: str, *, head: int = 10, tail: int = 40, max_errors: int = 500, max_warnings: int = 50
) -> CompressionResult:
    """Compress console output or a log: keep the first `head` lines (the commands run) and the last `tail`
    verbatim, every error line (up to `max_errors`; Python tracebacks whole, or their first 5 and last 20 lines),
    each distinct warning once (up to `max_warnings`, digits aside); collapse every run of similar lines before the
    tail to its first line and a count (among kept lines from 3 lines on; among dropped lines from 10 lines on,
    the 50 longest); replace every gap with one line naming the lines it stands for. The first line says what was
    kept.

    Deterministic and idempotent: compressed output is returned as it is, and so is a log with nothing to drop.

        >>> log = "\\n".join(["$ npm test"] + [f"[LOG] poll {i}" for i in range(200)] + ["[ERROR] 404 /a.png", "done"])
        >>> print(compress_log(log, head=2, tail=2).text)  # doctest: +NORMALIZE_WHITESPACE
        [compressed log: 203 → 5 lines, 2,924 → 269 chars; 1 error kept, 0 warning lines (0 distinct, each kept
         once); the first 2 and last 2 lines kept, the last verbatim; 1 run of repeats collapsed]
        $ npm test
        [LOG] poll 0
        … ×200 similar lines (2–201)
        [ERROR] 404 /a.png
        done
    """
    for name, value in (("head", head), ("tail", tail), ("max_errors", max_errors), ("max_warnings", max_warnings)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    if is_compressed(content) or not content:
        return unchanged(content, "log")
    plan = _Plan(split_lines(content))
    plan.scan(head, tail, max_errors, max_warnings)
    plan.find_runs()
    kept = plan.render()
    body = "\n".join(kept)
    return finish(content, "log", body, lambda size: _header(plan, (len(content), size), len(kept), head, tail))
