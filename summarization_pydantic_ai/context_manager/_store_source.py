"""Which history store the middleware writes: a fixed `HistoryStore`, the file at `messages_path`, or one chosen per
run (`history_store` or `messages_path` as a function of the `RunContext`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext

from ..store import HistoryStore, JsonHistoryStore

__all__ = ["PathSource", "StoreSourceMixin"]

PathSource = str | os.PathLike[str] | Callable[[RunContext[Any]], "str | os.PathLike[str] | None"] | None


class StoreSourceMixin:
    """The store-choosing half of the middleware (the fields it reads are the middleware's)."""

    messages_path: PathSource
    history_store: HistoryStore | Callable[[RunContext[Any]], HistoryStore | None] | None

    if TYPE_CHECKING:

        def store_for(self, path: str | os.PathLike[str]) -> JsonHistoryStore: ...

    def _unknown_message(self, message_id: str) -> str | None:
        store = self._static_store()
        if store is None or message_id in store:
            return None  # without a store (or with one per run) there is nothing to check against yet
        where = store.path if store.path is not None else "the history store"
        return (
            f"no message with id {message_id!r} in {where}: pin the id of a recorded message "
            "(get_message_id(message) of a message of the run, or an id from middleware.store)"
        )

    def _static_store(self) -> HistoryStore | None:
        if isinstance(self.history_store, HistoryStore):
            return self.history_store
        if self.history_store is not None:
            return None  # chosen per run
        if self.messages_path is None or callable(self.messages_path):
            return None
        return self.store_for(self.messages_path)

    def _store_for_run(self, ctx: RunContext[Any]) -> HistoryStore | None:
        if self.history_store is not None and not isinstance(self.history_store, HistoryStore):
            return self.history_store(ctx)
        if callable(self.messages_path):
            path = self.messages_path(ctx)
            return None if path is None else self.store_for(path)
        return self._static_store()
