"""The cost part of a session catalogue: the ledger that goes on counting as records are appended, and the totals a
listing shows (computed when the catalogue is written, so a listing prices nothing), stored as pickles that only
the cost classes may be read back from.

Why pickles: the ledger's state (spend by kind, open savings, the prompt-cache figures and reductions) belongs to
the cost package and grows with it; a pickle follows it without a codec to keep in step. Why safe: the unpickler
finds only classes of the cost and cache packages, `Decimal` and `Counter` (see "Restricting Globals" in the
`pickle` documentation); anything else in a catalogue makes it unreadable, and it is rebuilt from the records.
`FINGERPRINT` (the source of the cost, cache and catalogue modules) changes with the code: a catalogue written by
another version is rebuilt rather than read.

Imported when first used (the cost package imports the store package).
"""

from __future__ import annotations

import io
import pickle
import sys
import zlib
from collections import Counter
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse

from .._messages import get_message_id
from ..cost._ledger import CostLedger
from ..cost._spend import CostTotals

__all__ = ["CatalogLedger", "fingerprint", "ledger_of", "pickled", "totals_of"]

_PACKAGES = ("summarization_pydantic_ai.cost.", "summarization_pydantic_ai.cache.")


class CatalogLedger(CostLedger):
    """A `CostLedger` fed each message once (its first record): message ids need not be remembered, so what it
    keeps grows with the compactions, not the messages. Quiet: an unknown model is not warned about."""

    def __init__(self) -> None:
        super().__init__(warn_unpriced=False)

    def add_first(self, message: ModelMessage) -> None:
        """Count `message`, whose id is met for the first time."""
        self.add_messages([message])
        if isinstance(message, ModelResponse):
            self._seen.discard(get_message_id(message) or "")


@cache
def fingerprint() -> str:
    """A checksum of the source of the cost, cache and catalogue modules: what the pickles were written by."""
    package = Path(__file__).resolve().parents[1]
    sources = [*(package / "cost").glob("*.py"), *(package / "cache").glob("*.py")]
    sources += Path(__file__).parent.glob("_catalog*.py")
    checksum = 0
    for source in sorted(sources):
        checksum = zlib.crc32(source.read_bytes(), checksum)
    return f"{checksum:08x}"


def pickled(value: CatalogLedger | CostTotals) -> bytes:
    return pickle.dumps(value, protocol=5)


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = _allowed.get((module, name))
        if found is None:
            found = _allowed[(module, name)] = _allow(module, name)
        return found


def _allow(module: str, name: str) -> type:
    """A class of an imported module of the cost or cache packages (importing nothing), else an error."""
    if module.startswith(_PACKAGES) or module == __name__:
        found = getattr(sys.modules.get(module), name, None)
        if isinstance(found, type):
            return found
    raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a session catalogue")


_allowed: dict[tuple[str, str], type] = {("decimal", "Decimal"): Decimal, ("collections", "Counter"): Counter}
"""The classes a catalogue may name, found once."""


def totals_of(data: bytes) -> CostTotals:
    """The totals pickled in a catalogue (`ValueError` when they are not)."""
    value = _safely(data)
    if not isinstance(value, CostTotals):
        raise ValueError("not cost totals")
    return value


def ledger_of(data: bytes) -> CatalogLedger:
    """The ledger pickled in a catalogue (`ValueError` when it is not)."""
    value = _safely(data)
    if not isinstance(value, CatalogLedger):
        raise ValueError("not a catalogue ledger")
    return value


def _safely(data: bytes) -> object:
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError, TypeError) as exc:
        raise ValueError(f"an unreadable catalogue: {exc}") from exc
