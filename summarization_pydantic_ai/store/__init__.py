"""History stores: the full, uncompressed conversation, keyed by stable message ids."""

from ._json_store import JsonHistoryStore
from ._protocol import (
    HistoryPage,
    HistoryStore,
    HistoryStoreError,
    HistoryStoreLockedError,
    InvalidSessionIdError,
    ensure_message_id,
    new_message_id,
    validate_session_id,
)
from ._reader import RecordBatch, StoredRecord, read_records
from ._report import DamagedRange, StoreReport
from ._working import working_context

__all__ = [
    "DamagedRange",
    "HistoryPage",
    "HistoryStore",
    "HistoryStoreError",
    "HistoryStoreLockedError",
    "InvalidSessionIdError",
    "JsonHistoryStore",
    "RecordBatch",
    "StoreReport",
    "StoredRecord",
    "ensure_message_id",
    "new_message_id",
    "read_records",
    "validate_session_id",
    "working_context",
]
