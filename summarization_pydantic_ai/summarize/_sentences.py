"""Reading agent text without a model: sentences, the ones that state a choice, and what a failure says.

The rules are about how people and agents write, not about any one transcript:

- A sentence states a choice when it uses a decision word (decide, decision, choose, opt for, settle on, go with,
  stick with, switch to, prefer, instead of, rather than, in favour of, makes more sense) or commits to a course
  in the first person ("I'll use", "we will exclude", "let's keep", "we use ... for ..."). Questions never do.
- A tool output reports a failure when its first or last lines carry an error signature: a traceback, an
  `...Error:`/`...Exception:` line, `ERROR`, `FAILED`, `fatal:`, a test summary with failures, a non-zero exit
  code. Only the head and the tail are read, so a 100 KB output costs the same as a short one, and code that
  merely mentions `logger.error` is not a failure.
- The headline of a failure is the exception line of a traceback (Python prints it last), else the first line
  with an error signature, else the first line.
"""

from __future__ import annotations

import re

__all__ = ["choice_sentences", "failure_headline", "is_choice", "key_sentences", "looks_failed", "sentences"]

_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[*_])|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")
_CHOICE = re.compile(
    r"""\b(?:
        decid(?:e|ed|es|ing)\b | decision\b | chose\b | chos(?:e|en|ing)\b | choos(?:e|es|ing)\b
      | opt(?:s|ed|ing)?\s+(?:for|to)\b | settl(?:e|ed|es|ing)\s+on\b
      | go(?:es|ing)?\s+with\b | went\s+with\b | stick(?:s|ing)?\s+with\b | switch(?:es|ed|ing)?\s+to\b
      | prefer(?:s|red|ring)?\b | instead\s+of\b | rather\s+than\b | in\s+favou?r\s+of\b
      | makes?\s+more\s+sense\b
      | (?:i|we)(?:'ll|\s+will|\s+shall|\s+should|'m\s+going\s+to|'re\s+going\s+to|\s+are\s+going\s+to)\s+
        (?:use|keep|drop|exclude|include|treat|adopt|report|store|pick|rely\s+on|stay\s+with|standardi[sz]e\s+on)\b
      | let(?:'s|\s+us)\s+(?:use|keep|drop|exclude|include|treat|adopt|go|settle|stick|switch|standardi[sz]e)\b
      | (?:i|we)\s+(?:use|keep|exclude|treat|standardi[sz]e\s+on)\s+\S+.*\bfor\b
    )""",
    re.IGNORECASE | re.VERBOSE,
)
# A literal every choice sentence holds (lower-cased): most narration has none, and a search for literals is fast.
_CHOICE_HINT = re.compile(
    "|".join(
        re.escape(word)
        for word in (
            "decid",
            "decision",
            "chose",
            "chos",
            "choos",
            "opt",
            "settl",
            " with",
            "switch",
            "prefer",
            "instead",
            "rather",
            "favo",
            "sense",
            "'ll",
            " will",
            " shall",
            " should",
            "going to",
            "let's",
            "let us",
            "i use",
            "we use",
            "i keep",
            "we keep",
            "i exclude",
            "we exclude",
            "i treat",
            "we treat",
            "standardi",
        )
    )
)
_CONCLUSION = re.compile(
    r"\b(?:overall|bottom\s+line|in\s+short|in\s+summary|to\s+sum\s+up|conclusion|result|root\s+cause|"
    r"turns\s+out|found|because|so\s+the)\b|\d",
    re.IGNORECASE,
)
_ERROR_START = (
    r"[ \t]*(?:Traceback \(most recent call last\)|[\w.]*(?:Error|Exception|Exit)\b|ERROR\b|Error\b|error:|"
    r"FAILED\b|FAIL:|fatal:|E {3})"
)
_ERROR_LINE = re.compile(_ERROR_START)  # matched at the start of each line: fails at once on most lines
# Signatures that can sit anywhere in a line: found by substring first (fast), then confirmed.
_ERROR_PHRASES = ("command not found", "No such file or directory", "Permission denied")
_ERROR_COUNTS = re.compile(r"\b\d+ failed(?:, \d+ passed| in \d)|\bexit (?:code|status) [1-9]")
_EXCEPTION_LINE = re.compile(r"^\s*[\w.]+(?:Error|Exception|Exit|Interrupt)\b")
_EDGE_CHARS = 600
_EDGE_LINES = 3


def sentences(text: str) -> list[str]:
    """The sentences (and list items) of `text`, code blocks left out, each on one line."""
    text = _CODE_BLOCK.sub(" ", text)
    return [flat for piece in _SPLIT.split(text) if (flat := " ".join(piece.split()))]


def is_choice(sentence: str) -> bool:
    """Whether `sentence` states a choice (see the module docstring); a question never does."""
    return not sentence.rstrip().endswith("?") and _CHOICE.search(sentence) is not None


def choice_sentences(text: str) -> list[str]:
    if _CHOICE_HINT.search(text.lower()) is None:  # one fast search: most of an agent's narration states no choice
        return []
    return [s for s in sentences(text) if is_choice(s)]


def key_sentences(text: str, limit: int) -> str:
    """`text` on one line if it fits in `limit`, else its first sentence, then the sentences that state a choice
    or a result (a conclusion word, a number), in their order, as many as fit."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    found = sentences(text)
    if not found:
        return flat[: limit - 1] + "…"
    kept = [found[0][:limit]]
    used = len(kept[0])
    for sentence in found[1:]:
        if used + len(sentence) + 1 > limit:
            continue
        if is_choice(sentence) or _CONCLUSION.search(sentence):
            kept.append(sentence)
            used += len(sentence) + 1
    return " ".join(kept) + (" …" if len(kept) < len(found) else "")


def _edges(text: str) -> list[str]:
    """The first and last lines of a text, at most `_EDGE_CHARS` characters of each end."""
    if len(text) <= 2 * _EDGE_CHARS:
        return text.splitlines()
    return [*text[:_EDGE_CHARS].splitlines()[:-1], *text[-_EDGE_CHARS:].splitlines()[1:]]


def _has_error(edge: str, lines: list[str]) -> bool:
    match = _ERROR_LINE.match
    if any(match(line) for line in lines):
        return True
    if any(phrase in edge for phrase in _ERROR_PHRASES):
        return True
    counts = " failed," in edge or " failed in " in edge or "exit code" in edge or "exit status" in edge
    return counts and _ERROR_COUNTS.search(edge) is not None


def looks_failed(text: str) -> bool:
    """Whether a tool output that was returned normally reports a failure: an error signature in its first or
    last lines (a test run, a traceback, a compiler or a database says so there)."""
    head, tail = text[:_EDGE_CHARS], text[-_EDGE_CHARS:]
    lines = head.split("\n", _EDGE_LINES)[:_EDGE_LINES] + tail.rsplit("\n", _EDGE_LINES)[-_EDGE_LINES:]
    return _has_error(head, lines) or (len(text) > _EDGE_CHARS and _has_error(tail, []))


def failure_headline(text: str, limit: int = 200) -> str:
    """The line of a failure that says what went wrong, on one line, at most `limit` characters."""
    lines = [line for line in _edges(text) if line.strip()]
    if not lines:
        return ""
    if any("Traceback (most recent call last)" in line for line in lines):
        exceptions = [line for line in lines if _EXCEPTION_LINE.match(line)]
        chosen = exceptions[-1] if exceptions else lines[-1]
    else:
        chosen = next((line for line in lines if _has_error(line, [line])), lines[0])
    flat = " ".join(chosen.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
