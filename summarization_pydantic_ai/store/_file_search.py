"""`JsonHistoryStore.search`: the search index beside the file (built, or caught up, on first use), ranked as the
scan ranks (more distinct terms first, then more occurrences, then recorded order), so it returns what the scan
of the whole history would, in milliseconds once the index exists.

One index object per file per process (`shared_index`): the store, every reader of the file and the harness's
history-search tools use the same one (one SQLite connection, opened and checked once).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from ._database import SearchHit
from ._fts_index import FileSearchIndex, IndexDiscardedError
from ._scan_search import SearchFilter, fts_expression, needles, parse_query, score

__all__ = ["forget_index", "search_file", "shared_index"]

_ATTEMPTS = 3
_INDEXES: dict[Path, FileSearchIndex] = {}
_GUARD = threading.Lock()


def shared_index(messages_path: str | Path) -> FileSearchIndex:
    """This process's index of the history file at `messages_path`."""
    resolved = Path(messages_path).resolve()
    with _GUARD:
        index = _INDEXES.get(resolved)
        if index is None:
            index = _INDEXES[resolved] = FileSearchIndex(resolved)
        return index


def forget_index(messages_path: str | Path) -> None:
    """Close and drop this process's index of a history file (its files are about to be deleted)."""
    with _GUARD:
        index = _INDEXES.pop(Path(messages_path).resolve(), None)
    if index is not None:
        index.close()


def search_file(
    messages_path: Path, session_id: str, query: str, where: SearchFilter, *, limit: int, offset: int
) -> list[SearchHit] | None:
    """The hits of `query` in the history at `messages_path`, through its index (caught up first). `None` when
    the index cannot answer the query (an expression FTS5 refuses): the caller scans instead. Sync."""
    term_needles = needles(parse_query(query))
    where.check(limit, offset)
    if not messages_path.exists():
        return []
    index = shared_index(messages_path)
    expression = fts_expression(query)
    for attempt in range(_ATTEMPTS):
        try:
            index.update()
            candidates = index.candidates(
                expression, roles=where.roles, tool_name=where.tool_name, since=where.since, until=where.until
            )
            break
        except IndexDiscardedError:
            if attempt == _ATTEMPTS - 1:
                raise
        except sqlite3.OperationalError:
            return None
    else:  # pragma: no cover - the loop always breaks, returns or raises
        return None
    scored = [
        (found, position, rowid)
        for rowid, position, words in candidates
        if (found := score(f" {words} ", term_needles))
    ]
    scored.sort(key=lambda item: (-item[0], item[1]))
    page = scored[offset : offset + limit]
    rows = index.rows([rowid for _, _, rowid in page])
    return [
        SearchHit(session_id, r.message_id, r.position, r.roles, r.tool_names, r.timestamp, r.body, found)
        for found, _, rowid in page
        if (r := rows.get(rowid)) is not None
    ]
