"""Log and console-output previews: line and level counts, the time span, the commands run, the error lines
(identical messages grouped, Python tracebacks condensed to their header, last frame and exception) and the
tail of the output, all with 1-based line numbers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ._common import Section, assemble, fmt_int, number_lines, plural

__all__ = [
    "DIGITS",
    "TRACEBACK",
    "canonical_line",
    "classify_line",
    "is_frame_line",
    "is_log",
    "line_level",
    "log_preview",
    "starts_like_log",
    "traceback_end",
]

_TS = (
    r"(?:\d{4}[-/.]\d{2}[-/.]\d{2}[T _]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:\s?Z|\s?[+-]\d{2}:?\d{2})?"
    r"|\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?"
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2},? (?:\d{4} )?\d{2}:\d{2}:\d{2}"
    r"|\d{10}(?:\.\d+)?)"
)
_TIMESTAMP = re.compile(_TS)
_LEADING_TIMESTAMP = re.compile(rf".{{0,3}}?{_TS}")
"""A timestamp starting within a line's first 4 characters (the leftmost one: the same as `_TIMESTAMP.search`
when that finds one there, without scanning the rest of the line)."""
_LEVEL_WORDS = "TRACE|DEBUG|INFO|NOTICE|LOG|VERBOSE|WARN|WARNING|ERROR|ERR|FATAL|CRITICAL|SEVERE|PANIC"
_STRONG = re.compile(
    rf"\s*[\[(]?{_TS}"
    rf"|\s*\[?(?:{_LEVEL_WORDS})\]?(?::|\s|$)"
    r"|[IWEF]\d{4} \d{2}:\d{2}"  # glog
    r"|npm (?:ERR!|WARN)"
    r"|(?:level|severity)=\w",
)
_LOWER_LEVELS = "trace|debug|info|notice|warn|warning|error|err|fatal|critical|verbose|log"
_LEVEL_UPPER = re.compile(rf"\b({_LEVEL_WORDS})\b")
_LEVEL_LOWER = re.compile(
    rf"(?<=\[)(?i:{_LOWER_LEVELS})(?=\])"  # [info], [Error]
    rf"|\b(?i:{_LOWER_LEVELS})(?=:)"  # error: ..., Warning: ...
)
_LEVEL_SET = frozenset(_LEVEL_WORDS.split("|"))
_LEVEL_LOGFMT = re.compile(r'(?:level|severity|"level"|"severity")\s*[=:]\s*"?(\w+)', re.IGNORECASE)
TRACEBACK = re.compile(r"\s*Traceback \(most recent call last\):")
_FRAME = re.compile(r'\s+File "[^"]*", line \d+|\s+at [\w$.<>\[\] ]+[(:]|\s+at .+:\d+:\d+\)?$')
_PROMPT = re.compile(r"(?:\$|>>>|PS [^>\n]{0,80}>|\w[\w.-]*@[\w.-]+[:~][^$#\n]{0,80}[$#]) \S")
_ERROR_TEXT = re.compile(
    r"Traceback \(most recent call last\)|\b(?:[A-Z]\w*)?(?:Error|Exception)\b(?::|$)"
    r"|\b(?:[Ee]rror|ERROR|[Ff]atal|FATAL|panic)(?:\[\w+\])?:|npm ERR!|\bFAIL(?:ED)?\b"
    r"|\bUnhandled(?:Promise)?Rejection|Segmentation fault|\[(?i:error|err|fatal|crit\w*)\]"
)
_WARN_TEXT = re.compile(r"\b[Ww]arning:|\b[A-Z]\w*Warning\b|\[(?i:warn|warning)\]|\bWARN(?:ING)?\b")
_ERROR_HINTS = (
    "rror",
    "RROR",
    "ERR",
    "xception",
    "atal",
    "ATAL",
    "FAIL",
    "anic",
    "ANIC",
    "Traceback",
    "fault",
    "Unhandled",
    "rit",
    "RIT",
    "SEVERE",
    "EMERG",
    "ALERT",
)  # a line with none of these cannot match the error patterns (a cheap filter before the regexes)
DIGITS = re.compile(r"\d+")
_CANON = {
    "WARNING": "WARN",
    "ERR": "ERROR",
    "CRITICAL": "FATAL",
    "SEVERE": "ERROR",
    "PANIC": "FATAL",
    "VERBOSE": "DEBUG",
}
_ERROR_LEVELS = frozenset({"ERROR", "FATAL"})
_QUIET_LEVELS = frozenset({"INFO", "DEBUG", "TRACE", "NOTICE", "LOG", "WARN"})
"""Lines at these levels are never error lines, whatever their message says."""
_PREFIX = 80
"""Levels are looked for in a line's first characters (the prefix), not in its message."""
_MAX_ERRORS = 10
_TAIL = 10


def is_log(lines: Sequence[str]) -> tuple[bool, float]:
    """Whether these (sampled) lines read as a log or console output, and the share of lines that start like
    log lines (timestamp or level first)."""
    strong = signal = 0
    traceback = False
    n = 0
    for line in lines:
        if not line.strip():
            continue
        n += 1
        if _STRONG.match(line):
            strong += 1
        elif (
            _FRAME.match(line) or _PROMPT.match(line) or line_level(line) or _is_error_text(line) or _is_warn_text(line)
        ):
            signal += 1
        if not traceback and TRACEBACK.match(line):
            traceback = True
    if n == 0:
        return False, 0.0
    share = strong / n
    found = share >= 0.3 or (strong + signal) / n >= 0.4 or (traceback and strong + signal >= 3)
    # console output: the transcript of a command (`$ npm test` first)
    first = next((line for line in lines if line.strip()), "")
    found = found or (_PROMPT.match(first) is not None and strong + signal >= 2)
    return found and n >= 2, share


def is_frame_line(line: str) -> bool:
    """Whether `line` is a stack frame (`  File "x.py", line 3`, `    at f (app.js:1:2)`)."""
    return _FRAME.match(line) is not None


def starts_like_log(line: str) -> bool:
    """Whether `line` starts the way log lines do (a timestamp or a level first)."""
    return _STRONG.match(line) is not None


def _is_error_text(line: str) -> bool:
    return any(hint in line for hint in _ERROR_HINTS) and _ERROR_TEXT.search(line) is not None


def _is_warn_text(line: str) -> bool:
    return ("arn" in line or "ARN" in line) and _WARN_TEXT.search(line) is not None


_LOWER_COLON = tuple(f"{word}:" for word in _LOWER_LEVELS.split("|"))


def _may_have_lower_level(prefix: str) -> bool:
    """A cheap filter before `_LEVEL_LOWER`: a bracket, or a level word right before a colon."""
    if "[" in prefix:
        return True
    if ":" not in prefix:
        return False
    low = prefix.lower()
    return any(word in low for word in _LOWER_COLON)


def line_level(line: str) -> str | None:
    """The line's level (canonical: ERROR, WARN, INFO...), looked for in its first characters."""
    prefix = line[:_PREFIX]
    m = _LEVEL_UPPER.search(prefix)
    if m is not None:
        word = m.group(1)
    else:
        word = None
        if "=" in prefix or '"' in prefix:
            m = _LEVEL_LOGFMT.search(prefix)
            word = m.group(1).upper() if m else None
        if (word is None or word not in _LEVEL_SET) and _may_have_lower_level(prefix):
            m = _LEVEL_LOWER.search(prefix)
            word = m.group(0).upper() if m else None
    if word is None or word not in _LEVEL_SET:
        return None
    return _CANON.get(word, word)


def classify_line(line: str) -> Literal["error", "warning"] | None:
    """Whether a log line is an error line, a warning line or neither. A line at a quiet level (INFO, DEBUG...)
    is never an error, whatever its message says."""
    return _classify(line, line_level(line))


def _classify(line: str, level: str | None) -> Literal["error", "warning"] | None:
    if level in _ERROR_LEVELS or ((level is None or level not in _QUIET_LEVELS) and _is_error_text(line)):
        return "error"
    if level == "WARN" or (level is None and _is_warn_text(line)):
        return "warning"
    return None


@dataclass(slots=True)
class _Entry:
    """One distinct error: its shown lines, the line numbers it occurred at and how many lines it spans."""

    shown: list[tuple[int, str]]
    at: list[int] = field(default_factory=list[int])


def canonical_line(text: str) -> str:
    """The line with a leading timestamp removed and digits masked: repeats of one message share it."""
    m = _LEADING_TIMESTAMP.match(text[:_PREFIX])
    if m is not None:
        text = text[m.end() :]
    return DIGITS.sub("#", text.strip())[:200]


def traceback_end(lines: Sequence[str], start: int) -> int:
    """Index of the exception line closing the traceback that starts at `start` (or the last line scanned)."""
    i = start + 1
    n = len(lines)
    while i < n and i - start < 2_000:
        line = lines[i]
        if not line or line[0] in " \t":
            i += 1
            continue
        if line.startswith(("During handling", "The above exception", "Traceback (most recent")):
            i += 1
            continue
        return i
    return min(i, n - 1)


def _line_refs(at: Sequence[int]) -> str:
    """`[3, 9, 12, 40, 41, 77]` -> `'3, 9, 12, …, 41, 77'` (plain numbers, usable as file offsets)."""
    if len(at) <= 6:
        return ", ".join(str(n) for n in at)
    return ", ".join(str(n) for n in at[:3]) + ", …, " + ", ".join(str(n) for n in at[-2:])


@dataclass(slots=True)
class _LogScan:
    """One pass over the lines: levels, errors (grouped), warnings, commands and the time span."""

    lines: Sequence[str]
    levels: dict[str, int] = field(default_factory=dict[str, int])
    errors: dict[str, _Entry] = field(default_factory=dict[str, _Entry])
    error_lines: int = 0
    warn_lines: int = 0
    commands: list[tuple[int, str]] = field(default_factory=list[tuple[int, str]])
    first_ts: str = ""
    last_ts: str = ""

    def run(self) -> _LogScan:
        lines = self.lines
        i, n = 0, len(lines)
        while i < n:
            line = lines[i]
            level = line_level(line)
            if level is not None:
                self.levels[level] = self.levels.get(level, 0) + 1
            if not self.first_ts and (m := _TIMESTAMP.match(line.lstrip(" [("))):
                self.first_ts = m.group(0)
            if len(self.commands) < 40 and _PROMPT.match(line):
                self.commands.append((i + 1, line))
            if TRACEBACK.match(line):
                i = self._traceback(i) + 1
                continue
            self._classify(i, line, level)
            i += 1
        for line in reversed(lines[-50:]):
            if m := _TIMESTAMP.match(line.lstrip(" [(")):
                self.last_ts = m.group(0)
                break
        return self

    def _traceback(self, i: int) -> int:
        """Record the traceback starting at line index `i` as one error; returns the index of its last line."""
        lines = self.lines
        end = traceback_end(lines, i)
        shown = [(i + 1, lines[i])]
        frames = [j for j in range(i + 1, end) if _FRAME.match(lines[j])]
        if frames:
            shown.append((frames[-1] + 1, lines[frames[-1]]))  # where it was raised
        if end > i:
            shown.append((end + 1, lines[end]))  # the exception
        self.errors.setdefault("tb:" + canonical_line(lines[end]), _Entry(shown)).at.append(i + 1)
        self.error_lines += 1 + (end > i and _is_error_text(lines[end]))
        return end

    def _classify(self, i: int, line: str, level: str | None) -> None:
        kind = _classify(line, level)
        if kind == "error":
            self.error_lines += 1
            key = canonical_line(line)
            entry = self.errors.get(key)
            if entry is None:
                shown = [(i + 1, line)]
                if i + 1 < len(self.lines) and _FRAME.match(self.lines[i + 1]):
                    shown.append((i + 2, self.lines[i + 1]))  # the first frame under a JS/Java error
                entry = self.errors[key] = _Entry(shown)
            entry.at.append(i + 1)
        elif kind == "warning":
            self.warn_lines += 1

    def facts(self) -> list[str]:
        errors = f"{plural(self.error_lines, 'error line')} ({fmt_int(len(self.errors))} distinct)"
        facts = [f"{errors}, {plural(self.warn_lines, 'warning line')}"]
        if self.levels:
            order = ["FATAL", "ERROR", "WARN", "NOTICE", "INFO", "LOG", "DEBUG", "TRACE"]
            ranked = sorted(self.levels.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99)
            facts.append("levels: " + " · ".join(f"{name} {fmt_int(count)}" for name, count in ranked))
        if self.first_ts and self.last_ts:
            facts.append(f"time: {self.first_ts} → {self.last_ts}")
        return facts

    def error_section(self, max_chars: int) -> Section | None:
        entries = list(self.errors.values())
        if not entries:
            return None
        dropped = max(0, len(entries) - _MAX_ERRORS)
        keep = entries[:4] + entries[-(_MAX_ERRORS - 4) :] if dropped else entries
        width = len(str(max(no for entry in keep for no, _ in entry.shown)))
        out: list[str] = []
        for k, entry in enumerate(keep):
            if k == 4 and dropped:
                out.append(f"  … {plural(dropped, 'more distinct error')} …")
            out.extend(number_lines(entry.shown, width))
            if len(entry.at) > 1:
                out.append(f"{'':>{width}}  ×{fmt_int(len(entry.at))} at lines {_line_refs(entry.at)}")
        return Section(out, "ends", "errors (line| text; repeats grouped):", floor=max_chars * 2 // 5)


def log_preview(content: str, lines: Sequence[str], max_chars: int) -> str:
    """The preview of a log / console output already split into `lines`."""
    scan = _LogScan(lines).run()
    n = len(lines)
    header = f"Log, {plural(n, 'line')}, {plural(len(content), 'char')}"
    sections: list[Section] = []
    if scan.commands:
        commands = scan.commands
        shown = number_lines(commands[:5] + (commands[-3:] if len(commands) > 8 else commands[5:8]))
        sections.append(Section(shown, "ends", f"commands ({fmt_int(len(commands))}):", floor=max_chars // 10))
    errors = scan.error_section(max_chars)
    if errors is not None:
        sections.append(errors)
    tail = [(j + 1, lines[j]) for j in range(max(0, n - _TAIL), n)]
    sections.append(Section(number_lines(tail), "tail", f"last {len(tail)} lines:", floor=max_chars // 4))
    return assemble(header, scan.facts(), sections, max_chars)
