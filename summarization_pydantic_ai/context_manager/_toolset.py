"""`read_history`: the tool an agent calls to get the exact originals a summary replaced."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.toolsets import FunctionToolset

from .._render import render_messages
from ..store import HistoryStore, HistoryStoreError

__all__ = ["history_toolset"]

_MAX_LIMIT = 50


def history_toolset(store_for: Callable[[RunContext[Any]], HistoryStore | None]) -> FunctionToolset[Any]:
    """A toolset with `read_history`, reading the store `store_for(ctx)` returns for the run."""
    toolset: FunctionToolset[Any] = FunctionToolset()

    @toolset.tool
    async def read_history(
        ctx: RunContext[Any], start_id: str, end_id: str | None = None, offset: int = 0, limit: int = 20
    ) -> str:
        """Read original conversation messages verbatim, from `start_id` to `end_id` (inclusive).

        Summaries name the ids of the messages they replaced. Results are paged: pass the `offset` given at the
        end of a page to read the next one.

        Args:
            start_id: id of the first message to read.
            end_id: id of the last message to read (default: up to the latest message).
            offset: position within the span to start at.
            limit: how many messages to return (at most 50).
        """
        store = store_for(ctx)
        if store is None:
            raise ModelRetry("this agent keeps no history file, so there is nothing to read")
        try:
            page = await store.read(start_id, end_id, offset=offset, limit=max(1, min(limit, _MAX_LIMIT)))
        except HistoryStoreError as exc:
            raise ModelRetry(str(exc)) from exc
        text = render_messages(page.messages, start_index=page.offset)
        more = (
            f"\n[{page.total - page.next_offset} more messages: call again with offset={page.next_offset}]"
            if page.next_offset is not None
            else ""
        )
        return f"[messages {page.offset}-{page.offset + len(page.messages) - 1} of {page.total}]\n{text}{more}"

    return toolset
