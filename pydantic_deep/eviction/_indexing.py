"""`EvictedOutputIndexer`: an evicted tool output stays searchable in the history store, with its preview's message.

`EvictionProcessor` replaces a large output by a preview as the tool returns, so the history store records the
preview; the full text is a file on the backend. A searchable store (SQLite, PostgreSQL, messages.json) indexes
text given with `add_search_text(message_id, text)` with a recorded message. The id of the request holding the
preview is known once `ContextManagerMiddleware` has recorded it, at the model request that sends it: so this
capability comes after the middleware (PatchToolCalls -> EvictionProcessor -> your processors ->
ContextManagerMiddleware -> EvictedOutputIndexer) and indexes, before each request, the previews the middleware
has just recorded.
"""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.models import ModelRequestContext

from summarization_pydantic_ai import ContextManagerMiddleware, HistoryCursor, get_message_id
from summarization_pydantic_ai.store import SearchableHistoryStore

from ..backends import BackendProtocol
from ._content import evicted_paths, evicted_text
from ._processor import EvictionProcessor

__all__ = ["EvictedOutputIndexer"]

logger = logging.getLogger("pydantic_deep")


class _IndexedIds:
    """Per store, the ids of the messages that have search text (read from the store once, then kept up to date):
    a message is indexed once, also across runs and after a resume."""

    def __init__(self) -> None:
        self._ids: weakref.WeakKeyDictionary[SearchableHistoryStore, set[str]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    async def of(self, store: SearchableHistoryStore) -> set[str]:
        try:
            with self._lock:
                known = self._ids.get(store)
        except TypeError:  # a store that cannot be weakly referenced or hashed: asked each time
            return set(await store.search_texts())
        if known is None:
            loaded = set(await store.search_texts())
            with self._lock:
                known = self._ids.setdefault(store, loaded)
        return known


@dataclass
class EvictedOutputIndexer(AbstractCapability[Any]):
    """Index the full text of each evicted tool output with the recorded message holding its preview, when the
    run's history store (`middleware.store_for_run`) is a `SearchableHistoryStore`: `store.search(...)`, a
    database's search and the history-search tool then find words that only the evicted output holds.

    `create_deep_agent` adds it when eviction and the context manager are both on. Put it after the middleware
    in `capabilities`. The full text is read from the run's `deps.backend` (else `eviction.backend`), where the
    processor saved it; a message is indexed once (a resumed session's are not read again).

    Example:
        ```python
        capabilities = [evictor, middleware, EvictedOutputIndexer(middleware=middleware, eviction=evictor)]
        ```
    """

    middleware: ContextManagerMiddleware
    eviction: EvictionProcessor
    _cursor: HistoryCursor | None = field(default=None, init=False, repr=False)
    """The run's history as indexed at its previous request: only new and edited messages are looked at."""
    _indexed: _IndexedIds = field(default_factory=_IndexedIds, init=False, repr=False)

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        clone = replace(self)
        clone._indexed = self._indexed  # shared by the runs: one read of each store's indexed ids per process
        clone._cursor = HistoryCursor(fingerprint_all=False)
        return clone

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        await self.index(ctx, request_context.messages)
        return request_context

    async def index(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> int:
        """Index the evicted outputs of the recorded messages of `messages` not indexed yet; returns how many
        messages got search text."""
        store = self.middleware.store_for_run(ctx)
        backend = self.eviction.backend_for(ctx)
        if not isinstance(store, SearchableHistoryStore) or backend is None:
            return 0
        cursor = self._cursor
        if cursor is None:  # not a run's copy (`index` called directly): remember across calls all the same
            cursor = self._cursor = HistoryCursor(fingerprint_all=False)
        change = cursor.peek(messages)
        added = 0
        for i in [*change.edited, *range(change.start, len(messages))]:
            added += await self._index_message(messages[i], store, backend)
        cursor.commit(messages, change)
        return added

    async def _index_message(
        self, message: ModelMessage, store: SearchableHistoryStore, backend: BackendProtocol
    ) -> int:
        message_id = get_message_id(message)
        if not isinstance(message, ModelRequest) or message_id is None or not evicted_paths(message):
            return 0
        indexed = await self._indexed.of(store)
        if message_id in indexed or message_id not in store:
            return 0
        text = await evicted_text(message, backend)
        if not text:  # every file it points to was removed since: its preview is all there is
            return 0
        try:
            await store.add_search_text(message_id, text)
        except Exception:  # the run goes on: the output stays readable, and indexing is tried again next run
            logger.warning("could not index the evicted output of message %s for search", message_id, exc_info=True)
            return 0
        indexed.add(message_id)
        return 1

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None
