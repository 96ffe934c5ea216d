"""What a database store knows of its session between calls, and how a message becomes a record: shared by the
SQLite and PostgreSQL stores (same layout: records in recording order, the latest version at the first's place)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from .._messages import get_message_id, summary_info
from ._catalog import CatalogFold, first_versions
from ._database import HistoryStoreConflictError
from ._framing import Record, clean_summary
from ._protocol import HistoryStoreError

__all__ = ["NewRecord", "SessionIndex", "encode_record", "load_summary"]


@dataclass
class SessionIndex:
    """One `Record` per message (offset = seq of its latest version), in the order of first recording."""

    session: int | None = None
    head: int = 0
    slots: list[Record] = field(default_factory=list[Record])
    positions: dict[str, int] = field(default_factory=dict[str, int])
    digests: dict[str, bytes] = field(default_factory=dict[str, bytes])
    catalog: CatalogFold | None = None
    """The session's catalogue as of `catalog_head`, as this store last wrote it (`_catalog`)."""
    catalog_head: int = -1

    def held_catalog(self, before: int) -> CatalogFold | None:
        """The catalogue this store holds of its session at head `before` (a new one for a session without
        records), to bring up to date with an append; `None`: the stored row is to be read."""
        if before == 0:
            return CatalogFold()
        return self.catalog if self.catalog_head == before else None

    def advance_catalog(self, fold: CatalogFold | None, new: Sequence[NewRecord]) -> CatalogFold | None:
        """`fold` (the catalogue at `head`, `None`: none to trust) with the first records of the append `new`
        added; forgotten until the append's transaction writes it (`catalog_written`)."""
        self.catalog, self.catalog_head = None, -1
        if fold is not None:
            for item in first_versions(new, self.positions):
                fold.add(item.message)
        return fold

    def catalog_written(self, fold: CatalogFold, head: int) -> None:
        self.catalog, self.catalog_head = fold, head

    def place(self, record: Record, position: int, digest: bytes) -> None:
        """Index `record` at `position`: a new message at the end, a newer version in the place of the first."""
        if position < len(self.slots):
            self.slots[position] = record
        else:
            self.positions[record.message_id] = len(self.slots)
            self.slots.append(record)
        self.digests[record.message_id] = digest

    def changed(self, encoded: list[NewRecord], *, head: int, expected: int | None, where: str) -> list[NewRecord]:
        """The records of `encoded` to write: those whose message is new or differs from its latest version (the
        first of repeats in one batch). When there are any and another writer moved the session's `head` since this
        store last saw it (`expected`), raises `HistoryStoreConflictError`: nothing may be written then."""
        batch: dict[str, bytes] = {}  # the digests of this batch's records (the session's are not copied)
        new: list[NewRecord] = []
        for item in encoded:
            latest = batch[item.message_id] if item.message_id in batch else self.digests.get(item.message_id)
            if latest != item.digest:
                batch[item.message_id] = item.digest
                new.append(item)
        if new and expected is not None and head != expected:
            raise HistoryStoreConflictError(
                f"another writer appended to {where} since this store read it; nothing was written: "
                "reload (await store.load()) and run the turn again"
            )
        return new


@dataclass
class NewRecord:
    message_id: str
    data: bytes
    """The message's JSON, as pydantic-ai encodes it."""
    digest: bytes
    summary: str | None
    """The summary provenance (JSON), for a summary."""
    message: ModelMessage


def encode_record(message: ModelMessage) -> NewRecord:
    """`message` as a record (`HistoryStoreError` when it has no id or cannot be encoded)."""
    message_id = get_message_id(message)
    if message_id is None:
        raise HistoryStoreError("every recorded message needs an id: call ensure_message_id first")
    try:
        data = ModelMessagesTypeAdapter.dump_json([message])[1:-1]
    except (ValueError, TypeError) as exc:
        raise HistoryStoreError(f"message {message_id!r} cannot be recorded: {str(exc)[:300]}") from exc
    info = summary_info(message)
    summary = json.dumps(clean_summary(info)) if info else None
    return NewRecord(message_id, data, hashlib.blake2b(data, digest_size=16).digest(), summary, message)


def load_summary(raw: str | None) -> dict[str, Any] | None:
    return json.loads(raw) if raw else None
