"""`HistoryArchiveSearch`: search the full, uncompressed history (messages, summaries, evicted outputs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic_ai import RunContext
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from summarization_pydantic_ai import HistoryStore, HistoryStoreError, InvalidSessionIdError, validate_session_id
from summarization_pydantic_ai._tokens import estimate_text_tokens
from summarization_pydantic_ai.store import HistoryDatabase, StoredRecord, shared_index
from summarization_pydantic_ai.store._scan_search import fts_expression

from ..backends import BackendProtocol
from ..eviction._content import evicted_text
from ._database_search import current_store, search_database
from ._index import Hit, IndexDiscardedError, Pending, SessionIndex, evicted_paths
from ._text import QueryError, query_terms
from ._tools import TOOL_NAMES, Role, build_toolset

__all__ = ["HistoryArchiveSearch", "SearchResult"]

_ATTEMPTS = 5
_LABELS = {"user": "User", "assistant": "Assistant", "tool": "Tool", "summary": "Summary", "system": "System"}
_MAX_LINE = 300


@dataclass(frozen=True)
class SearchResult:
    """What one query found: ranked hits and the text the agent sees."""

    hits: list[Hit]
    text: str
    total_shown: int
    page: int


def _utc_bound(value: str | None, name: str) -> str | None:
    """An ISO time as the UTC text the index stores (a time without an offset is taken as UTC)."""
    if value is None or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise QueryError(f"{name} must be an ISO time like 2026-11-22T10:00 or 2026-11-22T10:00+02:00") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def _excerpt(body: str, query: str, context_lines: int) -> str:
    """A few lines around the first line that matches a query term (case-insensitive)."""
    terms = sorted({w.lower() for t, _ in query_terms(query) for w in t.split()}, key=len, reverse=True)
    lines = body.splitlines() or [body]
    # The line holding the most query words (longest words first breaks ties toward the rarer match).
    scores = [sum(t in line.lower() for t in terms) for line in lines]
    match = max(range(len(lines)), key=lambda i: (scores[i], -i)) if any(scores) else 0
    window = lines[max(0, match - context_lines) : match + context_lines + 1]
    out: list[str] = []
    for line in window:
        if len(line) <= _MAX_LINE:
            out.append(line)
            continue
        lowered = line.lower()
        at = min((lowered.find(t) for t in terms if t in lowered), default=0)
        start = max(0, at - _MAX_LINE // 3)
        out.append(("…" if start else "") + line[start : start + _MAX_LINE] + "…")
    return "\n".join(out)


@dataclass
class HistoryArchiveSearch(AbstractToolset[Any]):
    """The `search_conversation_history` and `read_history` tools over a session's full history, as a toolset.

    Reads the very store the middleware writes (`HistoryArchiveSearch(store=middleware.store)`), a history file on
    its own (`messages_path=...`), or the run's session (`DeepAgentDeps.messages_path`) when given neither. With
    `sessions_dir`, `session="all"` searches every session under it. Pass the `backend` where evicted outputs live to
    index their full text too.

    Example:
        ```python
        search = HistoryArchiveSearch(store=middleware.store)
        agent = Agent(model, toolsets=[search])  # or search.toolset(): the two tools as a FunctionToolset
        ```
    """

    store: HistoryStore | None = None
    database: HistoryDatabase | None = None
    """Search the sessions of this database (SQLite, PostgreSQL): the run's session (`deps.session_id`), one by
    id, or `"all"`; the database searches itself (no index file)."""
    messages_path: str | Path | None = None
    sessions_dir: str | Path | None = None
    backend: BackendProtocol | None = None
    max_results: int = 10
    token_budget: int = 2_000
    """Upper bound on one result page, in estimated tokens."""
    context_lines: int = 2
    read_history_tool: bool = True
    """Define `read_history` too. `False` when another feature defines it over the same history (e.g.
    `ContextManagerMiddleware(expose_history_tool=True)`, whose summaries then name the ids to read)."""
    _indexes: dict[Path, SessionIndex] = field(default_factory=dict[Path, SessionIndex], init=False, repr=False)
    _tools: FunctionToolset[Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.store, self.messages_path, self.database)) > 1:
            raise ValueError("pass either store or messages_path or database, not several")
        if not 1 <= self.max_results <= 50:
            raise ValueError(f"max_results must be in 1..50, got {self.max_results}")
        if self.token_budget < 200:
            raise ValueError(f"token_budget must be at least 200, got {self.token_budget}")

    # -- sources ---------------------------------------------------------------------------------------------------

    @property
    def uses_database(self) -> bool:
        """The history is searched by its store (a database), not by an index file beside messages.json."""
        return self.database is not None or (self.store is not None and getattr(self.store, "path", None) is None)

    def history_store_for(self, ctx: RunContext[Any] | None) -> HistoryStore:
        """The store `read_history` reads: `store`, or the run's session of `database`."""
        if self.store is not None:
            return self.store
        assert self.database is not None
        return current_store(self.database, ctx)

    def path_for(self, ctx: RunContext[Any] | None) -> Path | None:
        if self.store is not None:
            path = getattr(self.store, "path", None)
            if path is None:
                raise HistoryStoreError("this store has no file to index; use a JsonHistoryStore")
            return Path(path)
        if self.messages_path is not None:
            return Path(self.messages_path)
        deps_path = getattr(ctx.deps, "messages_path", None) if ctx is not None else None
        return Path(deps_path) if deps_path is not None else None

    def index_for(self, path: str | Path) -> SessionIndex:
        """The index of the history file at `path`: the one this process shares with `JsonHistoryStore.search`."""
        resolved = Path(path).resolve()
        index = self._indexes.get(resolved)
        if index is None:
            index = self._indexes[resolved] = shared_index(resolved)
        return index

    def _session_paths(self, ctx: RunContext[Any] | None, session: str | None) -> list[tuple[str, Path]]:
        if session:
            if self.sessions_dir is None:
                raise QueryError("this search has no sessions_dir: leave session out to search the current session")
            root = Path(self.sessions_dir)
            if session == "all":
                return [(p.parent.name, p) for p in sorted(root.glob("*/messages.json"))]
            try:
                validate_session_id(session)
            except InvalidSessionIdError as exc:
                raise QueryError(f'{exc}; pass the id of a session under {root}, or "all"') from exc
            path = root / session / "messages.json"
            if not path.is_file():
                raise QueryError(f"no session {session!r} under {root}")
            return [(session, path)]
        path = self.path_for(ctx)
        return [("", path)] if path is not None else []

    async def update(self, index: SessionIndex, backend: BackendProtocol | None = None) -> int:
        """Bring `index` up to date with its file (O(new records)); evicted outputs are read from `backend`.
        Returns the number of messages (re)indexed."""
        source = backend or self.backend

        def needs_backend(pending: Pending) -> bool:
            return source is not None and any(evicted_paths(r.message) for r in pending.records)

        for _ in range(_ATTEMPTS):
            # One worker-thread hop when no evicted output has to be read from the (async) backend.
            result = await anyio.to_thread.run_sync(lambda: index.update(defer=needs_backend))
            if isinstance(result, int):
                return result
            extras = await _evicted_texts(result.records, source)
            try:
                written = await anyio.to_thread.run_sync(index.apply, result, extras)
            except IndexDiscardedError:
                continue
            if written is not None:
                return written  # else another update got there first: read again
        return 0

    # -- searching -------------------------------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        role: Role | None = None,
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        session: str | None = None,
        page: int = 1,
        ctx: RunContext[Any] | None = None,
    ) -> SearchResult:
        """Ranked excerpts for `query`; raises `QueryError` for a query with nothing searchable."""
        fts = fts_expression(query)
        since, until = _utc_bound(since, "since"), _utc_bound(until, "until")
        if page < 1:
            raise QueryError("page starts at 1")
        if self.uses_database:
            filters = {"roles": [role] if role else (), "tool_name": tool_name, "since": since, "until": until}
            want = self.max_results * page
            found = await search_database(
                self.database, self.store, ctx, query, session=session, filters=filters, limit=want + 1
            )
            shown = found[(page - 1) * self.max_results : want]
            return SearchResult(shown, self._format(query, shown, page, len(found) > want), len(shown), page)
        sources = self._session_paths(ctx, session)
        backend = self.backend or (getattr(ctx.deps, "backend", None) if ctx is not None else None)
        hits: list[Hit] = []
        want = self.max_results * page
        for name, path in sources:
            index = self.index_for(path)
            for attempt in range(2):  # a corrupt index is removed, rebuilt and queried again, once
                try:
                    await self.update(index, backend)
                    found = await anyio.to_thread.run_sync(
                        lambda index=index: index.search(
                            fts,
                            roles=[role] if role else (),
                            tool_name=tool_name,
                            since=since,
                            until=until,
                            limit=want + 1,
                        )
                    )
                    break
                except IndexDiscardedError:
                    if attempt:
                        raise
            else:  # pragma: no cover - the loop always breaks or raises
                found = []
            hits += [replace(hit, session=name) for hit in found]  # one index per file, labelled per query
        hits.sort(key=lambda h: h.score)
        shown = hits[(page - 1) * self.max_results : want]
        return SearchResult(shown, self._format(query, shown, page, len(hits) > want), len(shown), page)

    def _format(self, query: str, hits: list[Hit], page: int, more: bool) -> str:
        if not hits:
            return f"No messages match {query[:200]!r}." + (" (past the last page)" if page > 1 else "")
        first = (page - 1) * self.max_results + 1
        lines = [f"Matches for {query[:200]!r} (results {first}-{first + len(hits) - 1}, best first):"]
        budget = self.token_budget - estimate_text_tokens(lines[0]) - 60
        for n, hit in enumerate(hits, start=first):
            label = "/".join(_LABELS.get(r, r) for r in hit.roles.split())
            where = f" session {hit.session}," if hit.session else ""
            block = f"\n{n}. [{label}]{where} message id {hit.message_id} ({hit.timestamp[:19]})\n" + "\n".join(
                "   " + line for line in _excerpt(hit.body, query, self.context_lines).splitlines()
            )
            cost = estimate_text_tokens(block)
            if cost > budget:
                lines.append(f"\n[{len(hits) - n + first} more matches cut to stay within the output budget]")
                break
            budget -= cost
            lines.append(block)
        lines.append('\nFor a verbatim original: read_history(start_id="<message id>").')
        if more:
            lines.append(f"More results: search again with page={page + 1}.")
        return "\n".join(lines)

    # -- the tools: the object is a toolset; `toolset()` gives the same tools as a `FunctionToolset` -----------------

    def toolset(self) -> FunctionToolset[Any]:
        """`search_conversation_history` and `read_history` as a pydantic-ai `FunctionToolset`."""
        if self._tools is None:
            self._tools = build_toolset(self)
        return self._tools

    @property
    def id(self) -> str | None:
        return None

    @property
    def tool_names(self) -> Sequence[str]:
        """The names of the tools this toolset defines."""
        return TOOL_NAMES if self.read_history_tool else TOOL_NAMES[:1]

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return await self.toolset().get_tools(ctx)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        return await self.toolset().call_tool(name, tool_args, ctx, tool)


async def _evicted_texts(records: Sequence[StoredRecord], source: BackendProtocol | None) -> dict[str, str]:
    """The full text of the outputs these records evicted, by message id (an output cleaned up since is skipped:
    the preview in the message is still indexed)."""
    if source is None:
        return {}
    return {
        record.message_id or "": await evicted_text(record.message, source)
        for record in records
        if evicted_paths(record.message)
    }
