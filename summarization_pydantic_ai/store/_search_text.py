"""What a search index stores for a message, and how queries become terms (and safe FTS5 expressions).

Shared by every searchable store and by the harness's history search, so they find the same messages."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    SystemPromptPart,
    ToolReturnPart,
    UserPromptPart,
)

from .._messages import get_message_id, summary_part
from .._render import render_message
from ._database import SearchQueryError

__all__ = ["IndexedText", "build_fts_query", "message_filters", "message_text", "query_terms", "space_cjk"]

MAX_QUERY_TERMS = 24
MAX_TERM_CHARS = 64

# CJK ideographs, kana, hangul: scripts written without spaces. Each character is indexed as its own token, so a
# query for a two-character word is a phrase of two tokens and finds it anywhere.
_CJK = re.compile(
    r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f])"
)
_TOKEN = re.compile(r'"([^"]*)"|(\S+)')
_WORD = re.compile(r"\w+", re.UNICODE)


def space_cjk(text: str) -> str:
    """Surround every CJK character with spaces (for the index and for queries alike)."""
    return _CJK.sub(r" \1 ", text)


@dataclass(frozen=True)
class IndexedText:
    message_id: str
    roles: str
    """Space-separated: user, assistant, tool, summary, system."""
    tool_names: str
    timestamp: str
    body: str
    """The rendered message (labels like `User:` and `Tool result name [id]:`)."""


def _roles(message: ModelMessage) -> list[str]:
    if summary_part(message) is not None:
        return ["summary"]
    if not isinstance(message, ModelRequest):
        return ["assistant"]
    roles: list[str] = []
    for part in message.parts:
        role = (
            "user"
            if isinstance(part, UserPromptPart)
            else "tool"
            if isinstance(part, ToolReturnPart)
            else "system"
            if isinstance(part, SystemPromptPart)
            else "summary"
            if isinstance(part, CompactionPart)
            else None
        )
        if role and role not in roles:
            roles.append(role)
    return roles or ["user"]


def _timestamp(message: ModelMessage) -> str:
    stamp: datetime | None = message.timestamp
    if stamp is None and isinstance(message, ModelRequest):
        stamp = next((t for p in message.parts if isinstance(t := getattr(p, "timestamp", None), datetime)), None)
    return stamp.isoformat() if stamp is not None else ""


def message_text(message: ModelMessage, extra: str = "") -> IndexedText | None:
    """The searchable form of a recorded message (`None` for one without a stable id)."""
    message_id = get_message_id(message)
    if message_id is None:
        return None
    tool_names = sorted({str(getattr(p, "tool_name", "")) for p in message.parts if getattr(p, "tool_name", None)})
    body = render_message(message) + (f"\n{extra}" if extra else "")
    return IndexedText(message_id, " ".join(_roles(message)), " ".join(tool_names), _timestamp(message), body)


def query_terms(query: str) -> list[tuple[str, bool]]:
    """The terms of a query as (text, is_prefix); quoted text stays one phrase. Operators and punctuation go."""
    terms: list[tuple[str, bool]] = []
    for match in _TOKEN.finditer(unicodedata.normalize("NFKC", query)):
        phrase, word = match.group(1), match.group(2)
        raw = phrase if phrase is not None else word
        prefix = phrase is None and raw.endswith("*")
        words = _WORD.findall(raw)
        if not words:
            continue
        text = " ".join(words)[:MAX_TERM_CHARS]
        if phrase is None and text.upper() in {"AND", "OR", "NOT", "NEAR"}:
            continue
        terms.append((text, prefix))
        if len(terms) >= MAX_QUERY_TERMS:
            break
    return terms


def build_fts_query(query: str) -> str:
    """A safe FTS5 expression: every term quoted (so nothing is an operator), prefix terms with `*`, terms ORed
    for recall (BM25 ranks documents with more terms first); CJK split into per-character phrases."""
    terms = query_terms(query)
    if not terms:
        raise SearchQueryError(
            "the query has no searchable words; search for words or identifiers that appeared in the conversation"
        )
    expressions: list[str] = []
    for text, prefix in terms:
        spaced = " ".join(space_cjk(text).split())
        quoted = '"' + spaced.replace('"', "") + '"'
        expressions.append(quoted + ("*" if prefix else ""))
    return " OR ".join(expressions)


def message_filters(
    alias: str, roles: Sequence[str], tool_name: str | None, since: str | None, until: str | None
) -> tuple[list[str], list[Any]]:
    """SQL conditions and their parameters on the message rows `alias` (columns `roles`, `tool_names`, `ts`): any
    of `roles`, the tool `tool_name`, a timestamp within `since`/`until` (inclusive). Names are compared whole and
    case-sensitively, as the scan compares them (`instr` on space-padded lists: no `LIKE` wildcards, no case
    folding)."""
    where: list[str] = []
    params: list[Any] = []
    if roles:
        where.append("(" + " OR ".join(f"instr(' ' || {alias}.roles || ' ', ?) > 0" for _ in roles) + ")")
        params += [f" {role} " for role in roles]
    if tool_name:
        where.append(f"instr(' ' || {alias}.tool_names || ' ', ?) > 0")
        params.append(f" {tool_name} ")
    if since:
        where.append(f"{alias}.ts >= ?")
        params.append(since)
    if until:
        where.append(f"{alias}.ts <= ?")
        params.append(until)
    return where, params
