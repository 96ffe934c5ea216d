"""`HistoryStore.read` paging, one rule for every store: the span from `start_id` to `end_id` (inclusive, in
recorded order), then the page `offset : offset + limit` of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from ._protocol import HistoryStoreError

__all__ = ["check_page", "page_of"]

R = TypeVar("R")


def check_page(offset: int, limit: int) -> None:
    """`HistoryStoreError` for a page that cannot exist (checked before a store takes its lock or a connection)."""
    if offset < 0 or limit <= 0:
        raise HistoryStoreError(f"offset must be >= 0 and limit > 0, got offset={offset}, limit={limit}")


def page_of(
    slots: Sequence[R],
    positions: Mapping[str, int],
    start_id: str | None,
    end_id: str | None,
    *,
    offset: int,
    limit: int,
    where: object,
) -> tuple[Sequence[R], int, int | None]:
    """The page's records, how many the span holds in all, and the next page's offset (`None` on the last page).
    `positions` maps a message id to its index in `slots`; `where` names the history in errors."""

    def index_of(message_id: str | None, default: int) -> int:
        if message_id is None:
            return default
        position = positions.get(message_id)
        if position is None:
            raise HistoryStoreError(f"no message with id {message_id!r} in {where}")
        return position

    start, end = index_of(start_id, 0), index_of(end_id, len(slots) - 1)
    if start > end:
        raise HistoryStoreError(f"start_id {start_id!r} comes after end_id {end_id!r}")
    span = slots[start : end + 1]
    next_offset = offset + limit if offset + limit < len(span) else None
    return span[offset : offset + limit], len(span), next_offset
