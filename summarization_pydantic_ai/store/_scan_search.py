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

__all__ = ["SearchFilter", "matches_filter", "normalized_words", "parse_query", "scan_search"]


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
    """Lowercase words without diacritics, each CJK character a word of its own (regular expressions, no
    per-character Python loop: the scan runs this over every message)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return _WORDS.findall(space_cjk(_COMBINING.sub("", decomposed)))


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


def _occurrences(words: list[str], term: list[str], prefix: bool) -> int:
    count, size = 0, len(term)
    for i in range(len(words) - size + 1):
        if words[i : i + size - 1] == term[:-1] and (
            words[i + size - 1].startswith(term[-1]) if prefix else words[i + size - 1] == term[-1]
        ):
            count += 1
    return count


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
    terms = parse_query(query)
    where.check(limit, offset)
    scored: list[tuple[float, int, SearchHit]] = []
    for position, message in enumerate(messages):
        text = message_text(message, extras.get(get_message_id(message) or "", ""))
        if text is None or not matches_filter(text, where):
            continue
        words = normalized_words(text.body)
        counts = [_occurrences(words, term, prefix) for term, prefix in terms]
        matched = sum(1 for c in counts if c)
        if not matched:
            continue
        score = matched + min(sum(counts), 999) / 1000
        hit = SearchHit(
            session_id, text.message_id, position, text.roles, text.tool_names, text.timestamp, text.body, score
        )
        scored.append((-score, position, hit))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [hit for _, _, hit in scored[offset : offset + limit]]
