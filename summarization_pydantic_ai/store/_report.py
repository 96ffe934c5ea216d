"""What a check of messages.json found: `StoreReport`, returned by `JsonHistoryStore.verify()` and `repair()`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ._framing import Scan

__all__ = ["DamagedRange", "StoreReport", "keep_damaged_copy", "report_of", "warn"]

logger = logging.getLogger("summarization_pydantic_ai.store")


@dataclass(frozen=True)
class DamagedRange:
    """Bytes of the file that hold no valid record."""

    start: int
    """Byte offset of the first damaged byte."""
    end: int
    """Byte offset just after the last damaged byte."""
    records_lost: int
    """How many records the range seems to have held (0: only framing bytes, no record, were damaged)."""
    torn: bool
    """At the very end of the file, without a final newline: a write that did not finish (crash, disk full)."""


@dataclass(frozen=True)
class StoreReport:
    """The state of a history file: how many records are intact, which bytes are damaged, what was lost."""

    path: Path
    records: int
    """Intact records (versions of messages and summaries included)."""
    damaged: list[DamagedRange] = field(default_factory=list[DamagedRange])
    needs_repair: bool = False
    """The file is not a well-formed JSON array as it is (damage, or a torn or missing framing byte)."""
    kept_copy: Path | None = None
    """Where `repair()` (or opening for writing) kept the damaged original, byte for byte."""

    @property
    def records_lost(self) -> int:
        return sum(d.records_lost for d in self.damaged)

    @property
    def ok(self) -> bool:
        return not self.damaged and not self.needs_repair

    def describe(self) -> str:
        if self.ok:
            return f"{self.path}: {self.records} records, no damage"
        ranges = ", ".join(f"bytes {d.start}-{d.end}{' (torn tail)' if d.torn else ''}" for d in self.damaged[:5])
        more = f" and {len(self.damaged) - 5} more" if len(self.damaged) > 5 else ""
        kept = f"; the damaged original is kept in {self.kept_copy}" if self.kept_copy else ""
        return (
            f"{self.path}: {self.records} intact records, {self.records_lost} record(s) lost in "
            f"{len(self.damaged)} damaged range(s) ({ranges or 'framing bytes only'}{more}){kept}"
        )


def report_of(path: Path, result: Scan, kept_copy: Path | None = None) -> StoreReport:
    damaged = [DamagedRange(d.start, d.end, d.records_lost, d.torn) for d in result.damage]
    return StoreReport(path, len(result.records), damaged, not result.clean, kept_copy)


def keep_damaged_copy(path: Path, data: bytes) -> Path:
    """Keep `data`, a damaged file's bytes, beside it as `<name>.damaged-<timestamp>`; returns where."""
    kept = path.with_name(f"{path.name}.damaged-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%f')}")
    kept.write_bytes(data)
    return kept


def warn(report: StoreReport) -> None:
    """Log damage as a warning naming the file and the byte offsets (once per file and finding: a reader that
    re-reads a damaged file does not repeat it)."""
    if report.ok:
        _warned.pop(report.path, None)
        return
    described = report.describe()
    if _warned.get(report.path) != described:
        _warned[report.path] = described
        logger.warning("damaged history file: %s", described)


_warned: dict[Path, str] = {}
