"""Copying sessions between history databases, losslessly (what `pydantic-deep migrate` runs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from ._database import HistoryDatabase
from ._protocol import HistoryStoreError

__all__ = ["CopyReport", "copy_sessions"]

_BATCH = 500


@dataclass
class CopyReport:
    """What `copy_sessions` copied: records (every version) and search texts, by session id."""

    records: dict[str, int] = field(default_factory=dict[str, int])
    search_texts: dict[str, int] = field(default_factory=dict[str, int])
    skipped: dict[str, int] = field(default_factory=dict[str, int])
    """Records the destination held already (an interrupted copy run again continues where it stopped)."""

    @property
    def sessions(self) -> int:
        return len(self.records)


def _encoded(messages: Sequence[ModelMessage]) -> list[bytes]:
    return [ModelMessagesTypeAdapter.dump_json([m]) for m in messages]


async def copy_sessions(
    source: HistoryDatabase, destination: HistoryDatabase, session_ids: Sequence[str] | None = None
) -> CopyReport:
    """Copy every record of each session (all of them, or `session_ids`), older versions and summaries included,
    in recording order, and the search texts added to them.

    A destination session must be empty, or hold a prefix of the source's records (a copy interrupted earlier:
    the rest is copied); anything else raises `HistoryStoreError` before that session is touched. Copying again
    is a no-op.
    """
    ids = list(session_ids) if session_ids is not None else [s.session_id for s in await source.sessions()]
    report = CopyReport()
    for session_id in ids:
        src, dst = source.session(session_id), destination.session(session_id)
        versions = await src.load_versions()
        if not versions:
            raise HistoryStoreError(f"no session {session_id!r} in {source.url}")
        present = await dst.load_versions()
        if present and _encoded(present) != _encoded(versions[: len(present)]):
            raise HistoryStoreError(
                f"session {session_id!r} exists in {destination.url} with other records; "
                "delete it there or copy the other sessions only"
            )
        rest = versions[len(present) :]
        for start in range(0, len(rest), _BATCH):
            await dst.append(rest[start : start + _BATCH])
        texts = await src.search_texts()
        for message_id, text in texts.items():
            await dst.add_search_text(message_id, text)
        report.records[session_id] = len(rest)
        report.skipped[session_id] = len(present)
        report.search_texts[session_id] = len(texts)
    return report
