"""What a summary must hold before it replaces anything, and how the toolkit completes what it can itself.

A summary is checked before it is committed: it is not empty, it has the required section headings, and it
repeats the latest user request verbatim (whitespace aside). A summary that fails is refused: the summarizer is
asked once more, then the deterministic summary is used. The file paths the replaced span touched are not
left to the model: the ones it did not mention are appended as a list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart

__all__ = [
    "DEFAULT_REQUIRED_SECTIONS",
    "call_paths",
    "check_sections",
    "complete_summary",
    "find_paths",
    "summary_problems",
    "touched_paths",
]

DEFAULT_REQUIRED_SECTIONS = ("Intent", "Decisions", "Artifacts", "Errors", "Current state", "Next steps")
"""The headings every summary must have (`## Intent` ... `## Next steps`), in any order."""

LATEST_REQUEST_HEADING = "## Latest user request"
FILES_HEADING = "## Files touched"

_PATH = re.compile(r"(?<![\w/.-])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,8}\b|https?://[^\s'\"<>)\]]+")
_PATH_KEYS = frozenset({"path", "file", "file_path", "filepath", "filename", "paths", "files", "target", "source"})
_MAX_ARG_DEPTH = 4


def check_sections(sections: Any) -> tuple[str, ...]:
    """`required_sections` as a tuple of titles; a bare string or an empty title is refused."""
    if isinstance(sections, str) or not isinstance(sections, Sequence):
        raise TypeError(f"required_sections must be a sequence of heading titles, got {sections!r}")
    titles = tuple(cast("Sequence[Any]", sections))
    bad = [t for t in titles if not isinstance(t, str) or not t.strip() or "\n" in t]
    if bad:
        raise ValueError(f"required_sections must be non-empty one-line titles, got {bad!r}")
    return tuple(t.strip().lstrip("#").strip() for t in titles)


def find_paths(text: str) -> list[str]:
    """File paths and URLs mentioned in `text`, in order (with repeats).

    Only lines holding a `/` can hold one, so the regular expression runs on those alone: most of a long tool
    output is skipped at the speed of a substring search (no match spans two lines)."""
    if "/" not in text:
        return []
    if len(text) < 512:
        return _PATH.findall(text)
    found: list[str] = []
    for line in text.splitlines():
        if "/" in line:
            found.extend(_PATH.findall(line))
    return found


def _arg_strings(value: Any, key: str, depth: int, out: list[tuple[str, str]]) -> None:
    """Every string in a tool call's arguments, with the (lower-cased) key it is under."""
    if isinstance(value, str):
        out.append((key, value))
    elif depth < _MAX_ARG_DEPTH and isinstance(value, dict):
        for k, v in cast("dict[Any, Any]", value).items():
            if isinstance(v, str | dict | list | tuple):
                _arg_strings(v, str(k).lower(), depth + 1, out)
    elif depth < _MAX_ARG_DEPTH and isinstance(value, list | tuple):
        for item in cast("list[Any]", value):
            _arg_strings(item, key, depth + 1, out)


def _call_args(part: ToolCallPart) -> Any:
    if isinstance(part.args, str):
        try:
            return json.loads(part.args)
        except ValueError:
            return part.args
    return part.args


def _add_paths(key: str, raw: str, seen: dict[str, None]) -> None:
    value = raw.strip()
    if not value or "\n" in value or len(value) > 500:
        return
    if key in _PATH_KEYS and ("/" in value or "." in value):
        seen.setdefault(value, None)
    elif "/" in value:
        for path in find_paths(value):
            if not path.startswith("http"):
                seen.setdefault(path, None)


def call_paths(part: ToolCallPart) -> list[str]:
    """The file paths one tool call operates on (arguments that are paths, or paths in a command), in order."""
    seen: dict[str, None] = {}
    strings: list[tuple[str, str]] = []
    _arg_strings(_call_args(part), "", 0, strings)
    for key, value in strings:
        _add_paths(key, value, seen)
    return list(seen)


def touched_paths(messages: Sequence[ModelMessage]) -> list[str]:
    """The file paths the tool calls in `messages` operated on (arguments that are paths), first use first."""
    seen: dict[str, None] = {}
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    seen.update(dict.fromkeys(call_paths(part)))
    return list(seen)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _has_heading(text: str, title: str) -> bool:
    return re.search(rf"^#{{1,6}}\s*{re.escape(title)}\s*:?\s*$", text, re.MULTILINE | re.IGNORECASE) is not None


def summary_problems(text: str, *, required_sections: Sequence[str], latest_request: str | None) -> list[str]:
    """Why `text` cannot be committed as a summary (empty when it can)."""
    if not text.strip():
        return ["the summary is empty"]
    problems = [f"no '## {title}' section" for title in required_sections if not _has_heading(text, title)]
    if latest_request and latest_request.strip() and _squash(latest_request) not in _squash(text):
        problems.append("the latest user request is not in it verbatim")
    return problems


def complete_summary(
    text: str, *, required_sections: Sequence[str], latest_request: str | None, paths: Sequence[str]
) -> str:
    """Add what the toolkit knows for sure and the summary lacks: an empty section for each missing heading,
    the latest user request verbatim, and the touched file paths it does not mention."""
    additions: list[str] = [f"## {title}\nnone" for title in required_sections if not _has_heading(text, title)]
    if latest_request and latest_request.strip() and _squash(latest_request) not in _squash(text):
        additions.append(f"{LATEST_REQUEST_HEADING}\n{latest_request}")
    mentioned = set(find_paths(text))
    missing = [p for p in paths if p not in mentioned and p not in text]
    if missing:
        additions.append(FILES_HEADING + "\n" + "\n".join(f"- `{p}`" for p in missing))
    return "\n\n".join([text.rstrip(), *additions]) if additions else text
