"""Search without an index: every message of a history is matched against the query (for the messages.json store).

Same query language and filters as the database stores (`SearchableHistoryStore.search`); the cost is linear in
the history's length, which is why the docs send search-heavy deployments to SQLite or PostgreSQL.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import ModelMessage

from .._messages import get_message_id
from ._database import SearchHit, SearchQueryError
from ._search_text import IndexedText, message_text, query_terms, space_cjk

__all__ = [
    "SearchFilter",
    "fts_expression",
    "matches_filter",
    "needles",
    "normalized_words",
    "parse_query",
    "scan_search",
    "score",
    "spaced",
]


@dataclass(frozen=True)
class SearchFilter:
    roles: Sequence[str] = ()
    tool_name: str | None = None
    since: str | None = None
    until: str | None = None

    def check(self, limit: int, offset: int) -> None:
        if limit <= 0 or offset < 0:
            raise SearchQueryError(f"limit must be > 0 and offset >= 0, got limit={limit}, offset={offset}")


_COMBINING = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")
_WORDS = re.compile(r"[^\W_]+")  # as FTS5 unicode61: "_" separates words


def normalized_words(text: str) -> list[str]:
    """Lowercase words without diacritics, each CJK character (Hangul syllable, kana, ideograph) a word of its own
    (regular expressions, no per-character Python loop: the scan and the file index run this over every message).
    Compatibility forms are folded (NFKD) and diacritics dropped; what the decomposition split that is no
    diacritic is put back together (NFC: a Hangul syllable is one character again, not three jamo)."""
    if text.isascii():
        return _WORDS.findall(text.lower())
    plain = _COMBINING.sub("", unicodedata.normalize("NFKD", text.casefold()))
    return _WORDS.findall(space_cjk(unicodedata.normalize("NFC", plain)))


def parse_query(query: str) -> list[tuple[list[str], bool]]:
    """The query's terms as (words, is_prefix); `SearchQueryError` when there are none."""
    terms = [(normalized_words(text), prefix) for text, prefix in query_terms(query)]
    terms = [(words, prefix) for words, prefix in terms if words]
    if not terms:
        raise SearchQueryError(
            "the query has no searchable words; search for words or identifiers that appeared in the conversation"
        )
    return terms


def matches_filter(text: IndexedText, where: SearchFilter) -> bool:
    if where.roles and not set(where.roles) & set(text.roles.split()):
        return False
    if where.tool_name and where.tool_name not in text.tool_names.split():
        return False
    if where.since and text.timestamp < where.since:
        return False
    return not (where.until and text.timestamp > where.until)


def spaced(words: Sequence[str]) -> str:
    """Normalized words as one string, each between single spaces: what `score` reads."""
    return " " + " ".join(words) + " "


def needles(terms: list[tuple[list[str], bool]]) -> list[str]:
    """What each query term is found by in a `spaced` text: its words between spaces (a prefix term open at the
    end, so its last word may continue)."""
    return [" " + " ".join(words) + ("" if prefix else " ") for words, prefix in terms]


def _occurrences(text: str, needle: str) -> int:
    count, at = 0, text.find(needle)
    while at >= 0:  # overlapping ones too: "a a" occurs twice in "a a a"
        count += 1
        at = text.find(needle, at + 1)
    return count


def score(text: str, term_needles: list[str]) -> float:
    """How well a message matches the query: the number of distinct terms found in its `spaced` words, plus a
    thousandth per occurrence (up to 999); 0 when none is found."""
    counts = [_occurrences(text, needle) for needle in term_needles]
    matched = sum(1 for c in counts if c)
    return matched + min(sum(counts), 999) / 1000 if matched else 0.0


def fts_expression(query: str) -> str:
    """An FTS5 expression over normalized words (what the file store's index holds) that matches every message
    the scan matches: each term quoted as a phrase of its words (a prefix term with `*`), terms ORed.
    `SearchQueryError` for a query without words."""
    return " OR ".join('"' + " ".join(words) + '"' + ("*" if prefix else "") for words, prefix in parse_query(query))


def scan_search(
    session_id: str,
    messages: Sequence[ModelMessage],
    extras: dict[str, str],
    query: str,
    where: SearchFilter,
    *,
    limit: int,
    offset: int,
) -> list[SearchHit]:
    """Rank `messages` (the latest versions, in recorded order) for `query`: more distinct terms first, then more
    occurrences, then recorded order."""
    term_needles = needles(parse_query(query))
    where.check(limit, offset)
    scored: list[tuple[float, int, SearchHit]] = []
    for position, message in enumerate(messages):
        text = message_text(message, extras.get(get_message_id(message) or "", ""))
        if text is None or not matches_filter(text, where):
            continue
        found = score(spaced(normalized_words(text.body)), term_needles)
        if not found:
            continue
        hit = SearchHit(
            session_id, text.message_id, position, text.roles, text.tool_names, text.timestamp, text.body, found
        )
        scored.append((-found, position, hit))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [hit for _, _, hit in scored[offset : offset + limit]]
