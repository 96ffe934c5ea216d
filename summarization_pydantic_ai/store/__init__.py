"""History stores: the full, uncompressed conversation, keyed by stable message ids."""

from ._json_store import JsonHistoryStore
from ._protocol import (
    HistoryPage,
    HistoryStore,
    HistoryStoreError,
    HistoryStoreLockedError,
    ensure_message_id,
    new_message_id,
)

__all__ = [
    "HistoryPage",
    "HistoryStore",
    "HistoryStoreError",
    "HistoryStoreLockedError",
    "JsonHistoryStore",
    "ensure_message_id",
    "new_message_id",
]
