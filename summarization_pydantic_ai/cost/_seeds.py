"""A session's earlier spend at a run's start, each record priced once per middleware instance.

Pricing a response (genai-prices) is the costly part of reading a session's totals from its history: every run
used to price the whole history again at its first request. One `CostTrackingMiddleware` instance keeps, per
session, the ledger of what it has priced: per history store, the ledger of its first N records (with the id of
the N-th, to notice a store rewritten since); without a store, the ledger of the latest history a run was given
(with a `HistoryCursor` over it); a completed run adds the requests it priced as they came (with their ids, which
must still be in the store). A later run of the
session prices only the records added since and not priced yet; a store or a history that does not continue the
cached one is priced from scratch.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pydantic_ai.messages import ModelMessage

from .._cursor import HistoryCursor
from .._messages import get_message_id
from ..store import HistoryStore
from ._ledger import CostLedger

__all__ = ["SessionSeeds"]


@dataclass(frozen=True)
class _StoreSeed:
    ledger: CostLedger
    """The store's first `records` messages (in recorded order, as `read` returns them), priced; after a run,
    also that run's requests (recorded after them: recognised by their ids, not priced again)."""
    records: int
    last_id: str | None
    produced: tuple[str, ...] = ()
    """The ids of the run's requests in `ledger` (responses, summaries): all must still be in the store."""


@dataclass(frozen=True)
class _HistorySeed:
    cursor: HistoryCursor
    ledger: CostLedger
    """Every request of the history the cursor was advanced to, priced."""


class SessionSeeds:
    """The priced sessions of one middleware instance (shared by its runs; safe for concurrent runs).

    A run starts from `from_store` or `from_history`, which return the session's ledger and a token; a run that
    completes hands its ledger back with `finish`, so the next run does not price the run's requests again."""

    def __init__(self) -> None:
        self._stores: weakref.WeakKeyDictionary[HistoryStore, _StoreSeed] = weakref.WeakKeyDictionary()
        self._history: _HistorySeed | None = None
        self._lock = threading.Lock()

    async def from_store(self, store: HistoryStore) -> tuple[CostLedger, object]:
        """The session's ledger: every record of `store` priced (only those added since the seed, when the store
        continues what this instance priced of it)."""
        total = len(store)
        seed = self._seed_of(store)
        ledger, new = await _continued(store, seed, total) if seed is not None else (None, None)
        if ledger is None or new is None:
            ledger = CostLedger()
            new = (await store.read(limit=total)).messages if total else []
        ledger.add_messages(new)
        last_id = get_message_id(new[-1]) if new else (seed.last_id if seed is not None else None)
        token = _StoreSeed(ledger.copy(), total, last_id)
        self._keep(store, token)
        return ledger, token

    def from_history(self, messages: Sequence[ModelMessage]) -> tuple[CostLedger, object]:
        """The session's ledger without a store: the responses of `messages` priced (only those after the history
        of the seed, when `messages` continues it)."""
        with self._lock:
            seed = self._history
            cursor = seed.cursor if seed is not None else HistoryCursor(fingerprint_all=False)
            change = cursor.peek(messages)
            if seed is not None and change.is_append_only:
                ledger, start = seed.ledger.copy(), change.start
            else:
                ledger, start = CostLedger(), 0
            ledger.add_messages(messages[start:])
            cursor.commit(messages, change)
            token = self._history = _HistorySeed(cursor, ledger.copy())
        return ledger, token

    def finish(
        self,
        store: HistoryStore | None,
        token: object,
        ledger: CostLedger,
        messages: Sequence[ModelMessage],
        produced: Sequence[str],
    ) -> None:
        """A completed run's session ledger (its requests priced as they came: `produced`, by message id) becomes
        the seed, unless another run of the session has started since (its seed stays: it holds more records)."""
        with self._lock:
            if store is None:
                if isinstance(token, _HistorySeed) and self._history is token:
                    token.cursor.advance(messages)
                    self._history = _HistorySeed(token.cursor, ledger.copy())
                return
        if isinstance(token, _StoreSeed) and self._seed_of(store) is token:
            self._keep(store, replace(token, ledger=ledger.copy(), produced=tuple(produced)))

    def _seed_of(self, store: HistoryStore) -> _StoreSeed | None:
        try:
            with self._lock:
                return self._stores.get(store)
        except TypeError:  # a store that cannot be weakly referenced or hashed: priced whole each time
            return None

    def _keep(self, store: HistoryStore, seed: _StoreSeed) -> None:
        try:
            with self._lock:
                self._stores[store] = seed
        except TypeError:
            pass


async def _continued(
    store: HistoryStore, seed: _StoreSeed, total: int
) -> tuple[CostLedger | None, list[ModelMessage] | None]:
    """A copy of the seed's ledger and the records added since it, or `(None, None)` when the store no longer
    starts with the seed's records (fewer records, or another message at the seed's last place)."""
    if total < seed.records or not all(message_id in store for message_id in seed.produced):
        return None, None  # e.g. rewound since: what the seed counted is no longer all there
    if seed.records == 0:
        return seed.ledger.copy(), (await store.read(limit=total)).messages if total else []
    page = (await store.read(offset=seed.records - 1, limit=total - seed.records + 1)).messages
    if not page or get_message_id(page[0]) != seed.last_id:
        return None, None
    return seed.ledger.copy(), page[1:]
