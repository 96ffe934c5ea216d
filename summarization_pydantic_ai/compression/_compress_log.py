"""Console and log compression for the working context: the head (the commands run) and the tail, every error
line (tracebacks whole or condensed) and each distinct warning once with its count; runs of repeated lines
collapse to one line and a count, and every gap says how many lines it stands for and which."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ._common import fmt_int, plural, split_lines
from ._log import TRACEBACK, canonical_line, classify_line, is_frame_line, traceback_end
from ._result import MARK, CompressionResult, finish, is_compressed, unchanged

__all__ = ["compress_log"]

_MAX_LINE = 500
"""A kept line longer than this keeps both ends."""
_TRACEBACK_WHOLE = 30
"""A traceback up to this many lines is kept whole; a longer one keeps its first 5 and last 20 lines."""
_FRAMES = 10
"""Stack frames kept under an error line (JavaScript, Java)."""
_MIN_RUN = 3
"""Runs of at least this many similar lines (digits aside) collapse to the first line and a count."""


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

    def scan(self, head: int, tail: int, max_errors: int, max_warnings: int) -> None:
        lines, n = self.lines, len(self.lines)
        self.keep.update(range(min(head, n)))
        self.keep.update(range(max(0, n - tail), n))
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

    def render(self) -> list[str]:
        """The kept lines in order; gaps become one line each, runs of similar lines one line and a count."""
        lines = self.lines
        out: list[str] = []
        previous = -1
        run_key, run_start, run_len = "", 0, 0

        def close_run(last: int) -> None:
            if run_len >= _MIN_RUN:
                del out[len(out) - run_len + 1 :]
                out.append(f"… ×{fmt_int(run_len)} similar lines ({fmt_int(run_start + 1)}–{fmt_int(last + 1)})")

        for i in sorted(self.keep):
            if i != previous + 1:
                close_run(previous)
                run_len = 0
                gap = i - previous - 1
                out.append(f"… {plural(gap, 'line')} omitted ({fmt_int(previous + 2)}–{fmt_int(i)}) …")
            line = lines[i]
            key = line if classify_line(line) == "error" else canonical_line(line)  # errors only collapse verbatim
            if run_len and key == run_key:
                run_len += 1
            else:
                close_run(previous)
                run_key, run_start, run_len = key, i, 1
            out.append(_clip(line))
            previous = i
        close_run(previous)
        if previous < len(lines) - 1:
            out.append(f"… {plural(len(lines) - 1 - previous, 'line')} omitted …")
        return out


def _header(plan: _Plan, chars: tuple[int, int], lines: int, head: int, tail: int) -> str:
    warnings = sum(len(at) for at in plan.warnings.values())
    over = f" ({fmt_int(plan.errors_over)} beyond the first kept ones dropped)" if plan.errors_over else ""
    return (
        f"{MARK}log: {fmt_int(len(plan.lines))} → {fmt_int(lines)} lines, {fmt_int(chars[0])} → {fmt_int(chars[1])} "
        f"chars; {plural(plan.errors, 'error')} kept{over}, {plural(warnings, 'warning line')} "
        f"({fmt_int(len(plan.warnings))} distinct, each kept once); the first {fmt_int(head)} and last "
        f"{fmt_int(tail)} lines kept; repeats collapsed]"
    )


def compress_log(
    content: str, *, head: int = 10, tail: int = 40, max_errors: int = 500, max_warnings: int = 50
) -> CompressionResult:
    """Compress console output or a log: keep the first `head` lines (the commands run) and the last `tail`,
    every error line (up to `max_errors`; Python tracebacks whole, or their first 5 and last 20 lines), each
    distinct warning once (up to `max_warnings`, digits aside); collapse runs of similar lines to the first one and
    a count; replace every gap with one line naming the lines it stands for. The first line says what was kept.

    Deterministic and idempotent: compressed output is returned as it is, and so is a log with nothing to drop.

        >>> log = "\\n".join(["$ npm test"] + [f"[LOG] poll {i}" for i in range(200)] + ["[ERROR] 404 /a.png", "done"])
        >>> print(compress_log(log, head=2, tail=2).text)  # doctest: +NORMALIZE_WHITESPACE
        [compressed log: 203 → 5 lines, 2,924 → 242 chars; 1 error kept, 0 warning lines (0 distinct, each kept
         once); the first 2 and last 2 lines kept; repeats collapsed]
        $ npm test
        [LOG] poll 0
        … 199 lines omitted (3–201) …
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
    kept = plan.render()
    body = "\n".join(kept)
    return finish(content, "log", body, lambda size: _header(plan, (len(content), size), len(kept), head, tail))
