"""A summarizer that needs no LLM: it extracts the summary sections from the messages themselves.

It is the offline default for examples and the fallback when an LLM summarizer fails. It is pure and deterministic
(same input, byte-identical summary: an unchanged summary stays in the provider's prompt cache), O(span), and
never invents anything: every line quotes or counts the messages, with the id of the message it came from.

What it keeps (`_extract` says how each is found): each turn's decisions (its final answer, and the sentences that
state a choice), each error with what fixed it, the files touched with their last action, the todo list, the
user's requests, next steps and open questions, and the latest request verbatim (or a reference to it when it is
long and stays verbatim beside the summary). A rolling summary folds in the entries of the one it replaces. Within
`max_chars`, each section keeps its newest entries when it must cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._artifacts import TODO_MARKS
from ._extract import INTENT_CHARS, Facts, Failure, FileTrail, extract, one_line
from ._latest import (
    LATEST_HEADING,
    latest_request_from_summary,
    latest_user_request,
    request_latest,
    summary_latest,
)
from ._protocol import SummaryRequest
from ._sections import ESSENTIAL_PREFIX, Section, fit_sections, read_previous
from ._sentences import key_sentences

__all__ = ["DeterministicSummarizer", "latest_request_from_summary", "latest_user_request"]

_FILE = re.compile(
    r"^`(?P<path>[^`\n]+)` \((?:changed by (?P<changers>[^;\n]+); (?:last (?P<last>\S+) at )?msg (?P<label>[^)\n]+)"
    r"|(?:used|read) by (?P<readers>[^;\n]+); msg (?P<rlabel>[^)\n]+))\)$"
)
_EARLIER = "earlier"
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_LABEL = re.compile(r"\(msg [^)\n]*\)")
_PATH_ENTRY = re.compile(r"^`([^`\n]+)`")
_TODO_BLOCK = re.compile(r"^Todo list \(msg ([^)\n]+)\):\n((?:- .*(?:\n|$))*)", re.MULTILINE)
_TODO_LINE = re.compile(r"^- (?:\[.\]|-) (.+) \(([^()]+)\)$")
_CARRIED = {"intent", "decisions", "errors", "next steps", "artifacts", "files touched"}
_DROPPED = {"current state", "latest user request", "tools used"}
_MAX_TODOS = 30
_PREVIOUS_ENTRY_CHARS = 600


def _file_line(path: str, trail: FileTrail) -> str:
    """`path` with the tools that changed it (or used it) and the message of its last action, which is named when
    it is not the last change (e.g. a read after the last edit)."""
    if not trail.changers:
        return f"`{path}` (used by {', '.join(trail.tools)}; msg {trail.label})"
    changers = [t for t in trail.tools if t in trail.changers and t != _EARLIER]  # in the order of their last use
    if not changers:
        return f"`{path}` (changed earlier)"
    last = trail.tools[-1]
    at = f"msg {trail.label}" if last == changers[-1] else f"last {last} at msg {trail.label}"
    return f"`{path}` (changed by {', '.join(changers)}; {at})"


def _bare_path(entry: str) -> tuple[str, bool] | None:
    """A left-out Artifacts entry keeps its path; the path of a file that was changed is never left out."""
    match = _PATH_ENTRY.match(entry)
    return (match[0], entry[match.end() :].startswith(" (changed")) if match else None


def _previous_files(entry: str) -> dict[str, FileTrail]:
    """The files an earlier summary's Artifacts entry names: one with its trail, or a list of changed ones."""
    if entry.startswith(ESSENTIAL_PREFIX):
        listed = entry[len(ESSENTIAL_PREFIX) :].split("; ", 1)[0]
        return {path: FileTrail([_EARLIER], [_EARLIER], _EARLIER) for path in _BACKTICKED.findall(listed)}
    if entry.endswith(" (changed earlier)") and (match := _PATH_ENTRY.match(entry)):
        return {match[1]: FileTrail([_EARLIER], [_EARLIER], _EARLIER)}
    parsed = _previous_file(entry)
    return dict([parsed]) if parsed else {}


def _previous_file(entry: str) -> tuple[str, FileTrail] | None:
    match = _FILE.match(entry)
    if match is None:
        return None
    if match["changers"]:
        changers = match["changers"].split(", ")
        tools = [*changers, match["last"]] if match["last"] else list(changers)
        return match["path"], FileTrail(tools, changers, match["label"])
    return match["path"], FileTrail(match["readers"].split(", "), [], match["rlabel"])


def _merge_files(earlier: dict[str, FileTrail], facts: Facts) -> dict[str, FileTrail]:
    """The earlier summary's files, then the span's (newer: last action and message), in the order of last use."""
    merged = dict(earlier)
    for path, new in facts.files.items():
        old = merged.pop(path, None)
        merged[path] = new
        if old is not None:
            merged[path] = FileTrail(
                [*(t for t in old.tools if t not in new.tools), *new.tools],
                [*old.changers, *(t for t in new.changers if t not in old.changers)],
                new.label,
            )
    return merged


def _error_line(failure: Failure) -> str:
    """The failure, then how it was fixed: the assistant's explanation, the files changed, and the successful call
    (its arguments where they differ from the failed call's); the failed call's arguments when nothing fixed it."""
    times = f" x{failure.count}" if failure.count > 1 else ""
    line = f"{failure.tool} failed{times} (msg {failure.label}): {failure.headline}"
    shown = failure.fix if failure.fix and failure.fix != failure.tool else None
    if failure.call.detail and failure.call.detail not in failure.headline and shown is None:
        line += f" [{one_line(failure.call.detail, 100)}]"
    if failure.fixed_at is None:
        return line + " -> not fixed in these messages"
    line += f" -> fixed (msg {failure.fixed_at})"
    if failure.explanation:
        line += f": {failure.explanation}"
    if failure.changed:
        line += f"; changed {', '.join(f'`{p}`' for p in failure.changed[:5])}"
    if shown is not None:
        line += f"; then {failure.tool} succeeded: {shown}"
    return line


def _todo_block(todos: tuple[str, list[tuple[str, str]]] | None) -> str:
    if todos is None:
        return ""
    label, items = todos
    shown = items[-_MAX_TODOS:]
    lines = [f"- {TODO_MARKS.get(status, '-')} {one_line(content, 150)} ({status})" for content, status in shown]
    if len(items) > len(shown):
        lines.insert(0, f"- ({len(items) - len(shown)} older items left out)")
    return f"\nTodo list (msg {label}):\n" + ("\n".join(lines) or "empty")


def _previous_todos(previous: str) -> tuple[str, list[tuple[str, str]]] | None:
    blocks = _TODO_BLOCK.findall(previous)
    if not blocks:
        return None
    label, body = blocks[-1]
    return label, [(m[1], m[2]) for m in map(_TODO_LINE.match, body.splitlines()) if m]


@dataclass
class DeterministicSummarizer:
    """Extracts intent, decisions, artifacts (with the message ids they came from), errors with their fixes, the
    current state, next steps and the latest user request, without calling a model.

    Example:
        ```python
        processor = SummarizationProcessor(DeterministicSummarizer(), trigger=('messages', 50), keep=10)
        ```
    """

    max_chars: int = 12_000
    """Upper bound on the summary's length; each section keeps its newest entries when it must cut (a latest user
    request that has to be repeated is kept whole)."""

    name: str = "deterministic"

    async def summarize(self, request: SummaryRequest) -> str:
        return self.summarize_sync(request)

    def summarize_sync(self, request: SummaryRequest) -> str:
        facts = extract(request.messages, request.first_index)
        header = f"Summary of {len(request.messages)} messages (extracted without a model)."
        if request.focus:
            header += f" Focus: {one_line(request.focus, 200)}"
        sections, earlier_files = self._carried(request.previous_summary)
        self._add_span(sections, facts, earlier_files, request_latest(request))
        todos = facts.todos or (_previous_todos(request.previous_summary) if request.previous_summary else None)
        current = f"## Current state\n{self._current(facts)}{_todo_block(todos)}"
        if len(current) > self.max_chars // 4:  # a small budget (a short span): the state takes its share only
            current = current[: max(self.max_chars // 4 - 1, 16)] + "…"
        latest = f"{LATEST_HEADING}{summary_latest(request)}"
        room = self.max_chars - len(header) - len(current) - len(latest) - 12
        order = ["Errors", "Decisions", "Artifacts", "Intent", "Next steps", "Earlier summary"]  # who gets spare room
        chosen = [sections[t] for t in order if t in sections]
        rendered = dict(zip((s.title for s in chosen), fit_sections(chosen, room), strict=True))
        body = [rendered[t] for t in ("Intent", "Decisions", "Artifacts", "Errors") if t in rendered]
        body += [current, rendered["Next steps"]]
        if "Earlier summary" in rendered:
            body.insert(0, rendered["Earlier summary"])
        return "\n\n".join([header, *body, latest])

    def _carried(self, previous: str | None) -> tuple[dict[str, Section], dict[str, FileTrail]]:
        """The sections, holding what the earlier summary kept (its entries, oldest first), and its files."""
        sections = {
            "Intent": Section("Intent", share=0.06),
            "Decisions": Section("Decisions", share=0.34),
            "Artifacts": Section("Artifacts", share=0.18, bare=_bare_path),
            "Errors": Section("Errors", share=0.34),
            "Next steps": Section("Next steps", share=0.04),
        }
        files: dict[str, FileTrail] = {}
        if not previous:
            return sections, files
        found, _ = read_previous(previous)
        leftovers: list[str] = []
        for title, raw in found.items():
            entries = [one_line(e, _PREVIOUS_ENTRY_CHARS) for e in raw]
            if title in ("artifacts", "files touched"):
                for entry in raw:  # whole: a list of changed files is never cut
                    found_files = _previous_files(entry)
                    if found_files:
                        files.update(found_files)
                    elif not entry.startswith(("also:", "(")):  # bare lists of files used: in the archive
                        path = _PATH_ENTRY.match(entry)
                        sections["Artifacts"].add(entry, key=f"path:{path[1]}" if path else None)
            elif title in _CARRIED:
                for entry in entries:
                    sections[title.capitalize() if title != "next steps" else "Next steps"].add(entry)
            elif title not in _DROPPED and title != "earlier summary":
                leftovers += [f"{title}: {e}" for e in entries]
        if leftovers:
            sections["Earlier summary"] = Section("Earlier summary", share=0.04)
            for entry in leftovers:
                sections["Earlier summary"].add(entry)
        return sections, files

    def _add_span(
        self, sections: dict[str, Section], facts: Facts, earlier_files: dict[str, FileTrail], latest: str | None
    ) -> None:
        latest_line = one_line(latest, INTENT_CHARS) if latest else None
        for text, label in facts.requests:
            if text != latest_line:  # the latest request has its own section
                sections["Intent"].add(f"{text} (msg {label})", key=text.lower())
        for text, label in facts.decisions:
            sections["Decisions"].add(f"{text} (msg {label})", key=" ".join(text.lower().split()))
        for path, trail in _merge_files(earlier_files, facts).items():
            sections["Artifacts"].add(_file_line(path, trail), key=f"path:{path}")
        for path, label in facts.mentioned.items():
            if path not in facts.files and path not in earlier_files:
                sections["Artifacts"].add(f"`{path}` (mentioned; msg {label})", key=f"path:{path}")
        for failure in facts.failures:
            line = _error_line(failure)  # the same failure fixed the same way: once, at its latest occurrence
            sections["Errors"].add(line, key=_LABEL.sub("", line).lower())
        for step in facts.next_steps:
            sections["Next steps"].add(one_line(step, 300))
        for question, label in facts.questions[-3:]:
            sections["Next steps"].add(f"Open question: {one_line(question, 300)} (msg {label})")

    def _current(self, facts: Facts) -> str:
        state = key_sentences(facts.last_text, 500) if facts.last_text else "none"
        if facts.tools:
            counts = ", ".join(f"{name} x{count}" for name, count in facts.tools.most_common(8))
            state += f"\nTools used: {counts}"
        return state
