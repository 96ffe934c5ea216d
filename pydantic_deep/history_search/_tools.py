"""The two tools of `HistoryArchiveSearch`: `search_conversation_history` and `read_history`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.toolsets import FunctionToolset

from summarization_pydantic_ai import HistoryStore, HistoryStoreError, JsonHistoryStore
from summarization_pydantic_ai._render import render_messages

from ._text import QueryError

__all__ = ["TOOL_NAMES", "ArchiveSearcher", "Role", "build_toolset"]

Role = Literal["user", "assistant", "tool", "summary", "system"]
TOOL_NAMES = ("search_conversation_history", "read_history")


class _Found(Protocol):
    @property
    def text(self) -> str: ...


class ArchiveSearcher(Protocol):
    """What the tools use of the search they are built over (`HistoryArchiveSearch`)."""

    @property
    def read_history_tool(self) -> bool: ...
    @property
    def uses_database(self) -> bool: ...
    @property
    def store(self) -> HistoryStore | None: ...

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
    ) -> _Found: ...

    def history_store_for(self, ctx: RunContext[Any] | None) -> HistoryStore: ...

    def path_for(self, ctx: RunContext[Any] | None) -> Path | None: ...


def build_toolset(search: ArchiveSearcher) -> FunctionToolset[Any]:
    """`search_conversation_history` and `read_history` over `search`, as a `FunctionToolset`."""
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool
    async def search_conversation_history(
        ctx: RunContext[Any],
        query: str,
        role: Role | None = None,
        tool_name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        session: str | None = None,
        page: int = 1,
    ) -> str:
        """Search the whole conversation, including what was summarized away and large tool outputs.

        Words are matched case-insensitively, in any language; "quoted text" matches a phrase, a trailing *
        a prefix (pars*). Results show message ids: use read_history for the exact original.

        Args:
            query: words, "a phrase", or prefix*.
            role: only messages of this role: user, assistant, tool, summary, system.
            tool_name: only messages with calls to or results from this tool.
            since: only messages at or after this ISO time (e.g. 2026-11-22T10:00).
            until: only messages at or before this ISO time.
            session: a session id to search instead of the current one, or "all".
            page: result page, from 1.
        """
        try:
            result = await search.search(
                query, role=role, tool_name=tool_name, since=since, until=until, session=session, page=page, ctx=ctx
            )
        except (QueryError, HistoryStoreError) as exc:
            return f"Search not run: {exc}"
        return result.text

    if not search.read_history_tool:
        return toolset

    @toolset.tool
    async def read_history(
        ctx: RunContext[Any], start_id: str, end_id: str | None = None, offset: int = 0, limit: int = 20
    ) -> str:
        """Read original messages verbatim, from start_id to end_id (inclusive), paged.

        Args:
            start_id: the first message id (from a search result or a summary).
            end_id: the last message id (default: just the start message's span to the end).
            offset: position within the span to start at.
            limit: messages per page (at most 50).
        """
        try:
            if search.uses_database:
                store = search.history_store_for(ctx)
            else:
                path = search.path_for(ctx)
                if path is None:
                    raise ModelRetry("this agent keeps no history file")
                store = search.store or JsonHistoryStore.reader(path)
            page = await store.read(start_id, end_id or start_id, offset=offset, limit=max(1, min(limit, 50)))
        except HistoryStoreError as exc:
            raise ModelRetry(str(exc)) from exc
        text = render_messages(page.messages, start_index=page.offset)
        if page.next_offset is not None:
            text += f"\n[more: call read_history again with offset={page.next_offset}]"
        return text

    return toolset
