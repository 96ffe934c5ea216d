"""The session catalogue: what a listing shows of a session, kept by its store as records are appended, so that
listing many sessions costs O(sessions), not O(messages).

One rule for every store: the records are folded in recording order and the first record of each message id
counts (a newer version of a message changes neither the counts, nor the first prompt, nor the cost: a request is
priced once, by its id). A store keeps the fold beside the history (messages.json: a sidecar; SQLite, PostgreSQL:
a row written in the append's own transaction) with a stamp of the history it describes; a reader trusts it only
when the stamp is the history's now, else it folds the records again (the same fold: never wrong, slower once).
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ModelResponse, UserPromptPart

from .._messages import is_summary_message

if TYPE_CHECKING:
    from ..cost._spend import CostTotals
    from ._catalog_ledger import CatalogLedger

__all__ = [
    "CatalogFold",
    "Recorded",
    "SessionCatalog",
    "first_versions",
    "fold_encoded",
    "fold_records",
    "prompt_of",
    "read_entry",
]

_FORMAT = 6
_FIRST_PROMPT_CHARS = 200


@dataclass(frozen=True)
class SessionCatalog:
    """What a listing shows of one session, as its store keeps it (`read_catalog` for a messages.json, `catalog()`
    of the databases): reading it costs the same for 5 messages and 50,000."""

    session_id: str
    message_count: int
    """Messages recorded (summaries, and newer versions of a message, not counted)."""
    compactions: int
    """Summaries recorded: how many times the history was compacted."""
    first_prompt: str | None
    """The first user prompt (its first 200 characters)."""
    first_message_at: datetime | None
    """The first message's timestamp."""
    model: str | None
    """The model of the latest response (`provider:model`)."""
    cost: CostTotals
    """What the recorded history cost (`session_costs` of its records)."""
    size_bytes: int
    """The history's size as stored (messages.json: the file; a database: its records, every version)."""
    created_at: datetime | None
    """When the store created the session (a database's first append; `None` for a messages.json)."""
    updated_at: datetime | None
    """When the history was last written (messages.json: the file's modification time)."""


def prompt_of(message: ModelMessage) -> str | None:
    """The text of the first user prompt of `message` (its first 200 characters), if it is a request with one."""
    if not isinstance(message, ModelRequest):
        return None
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            content = part.content
            text = content if isinstance(content, str) else " ".join(c for c in content if isinstance(c, str))
            return text[:_FIRST_PROMPT_CHARS]
    return None


class CatalogFold:
    """The catalogue of one session as it is built, record after record (`add`), and as it is stored (`dump`)."""

    def __init__(self, ledger: CatalogLedger | None = None) -> None:
        self.messages = 0
        self.compactions = 0
        self.first_prompt: str | None = None
        self.first_message_at: datetime | None = None
        self.model: str | None = None
        self.ledger = ledger if ledger is not None else _ledger().CatalogLedger()

    def add(self, message: ModelMessage) -> None:
        """Count the first record of a message (never a newer version of one counted already)."""
        self.ledger.add_first(message)
        if is_summary_message(message):
            self.compactions += 1
            return
        self.messages += 1
        if self.first_message_at is None:
            self.first_message_at = _time_of(message)
        if self.first_prompt is None:
            self.first_prompt = prompt_of(message)
        if isinstance(message, ModelResponse) and message.model_name:
            self.model = _model_label(message)

    def dump(self) -> tuple[bytes, bytes]:
        """The fold as stored, in two parts: what a listing reads (a line with a length, the view as JSON: counts,
        first prompt, model; then the cost totals, pickled) and the ledger a writer goes on from (pickled:
        `_catalog_ledger`). A listing reads the first alone, whatever the ledger holds."""
        costs = _ledger()
        view = {
            "format": [_FORMAT, costs.fingerprint()],
            "messages": self.messages,
            "compactions": self.compactions,
            "first_prompt": self.first_prompt,
            "first_message_at": self.first_message_at.isoformat() if self.first_message_at else None,
            "model": self.model,
        }
        head = json.dumps(view, separators=(",", ":")).encode()
        shown = b"%d\n%s%s" % (len(head), head, costs.pickled(self.ledger.totals()))
        return shown, costs.pickled(self.ledger)

    @classmethod
    def load(cls, shown: bytes, ledger: bytes) -> CatalogFold | None:
        """The fold `dump` wrote (`None`: not one, or of another format: fold the records again)."""
        parts = _parts(shown)
        if parts is None:
            return None
        view, _ = parts
        try:
            fold = cls(_ledger().ledger_of(ledger))
            fold.messages, fold.compactions = int(view["messages"]), int(view["compactions"])
            fold.first_prompt, fold.model = view["first_prompt"], view["model"]
            fold.first_message_at = _time(view["first_message_at"])
        except (KeyError, TypeError, ValueError):
            return None
        return fold

    def entry(
        self, session_id: str, *, size_bytes: int, created_at: datetime | None, updated_at: datetime | None
    ) -> SessionCatalog:
        return SessionCatalog(
            session_id,
            self.messages,
            self.compactions,
            self.first_prompt,
            self.first_message_at,
            self.model,
            self.ledger.totals(),
            size_bytes,
            created_at,
            updated_at,
        )


def read_entry(
    shown: bytes, session_id: str, *, size_bytes: int, created_at: datetime | None, updated_at: datetime | None
) -> SessionCatalog | None:
    """What a listing shows of a stored fold (the first part `dump` gives; `None`: not a fold of this format)."""
    parts = _parts(shown)
    if parts is None:
        return None
    view, totals = parts
    try:
        return SessionCatalog(
            session_id,
            int(view["messages"]),
            int(view["compactions"]),
            view["first_prompt"],
            _time(view["first_message_at"]),
            view["model"],
            _ledger().totals_of(totals),
            size_bytes,
            created_at,
            updated_at,
        )
    except (KeyError, TypeError, ValueError):
        return None


def fold_records(records: Iterable[tuple[str | None, ModelMessage]]) -> CatalogFold:
    """The fold of a whole history: its records (message id, message) in recording order, versions included."""
    fold, seen = CatalogFold(), set[str]()
    for message_id, message in records:
        if message_id is not None:
            if message_id in seen:
                continue  # a newer version of a message counted already
            seen.add(message_id)
        fold.add(message)
    return fold


class Recorded(Protocol):
    """A record an append writes (the stores' `NewRecord`s)."""

    @property
    def message_id(self) -> str: ...

    @property
    def message(self) -> ModelMessage: ...


_R = TypeVar("_R", bound=Recorded)


def fold_encoded(records: Sequence[tuple[str, bytes]]) -> CatalogFold:
    """The fold of a database session's records (message id, the message's JSON), in recording order, every
    version (decoded in one call)."""
    if not records:
        return CatalogFold()
    messages = ModelMessagesTypeAdapter.validate_json(b"[" + b",".join(data for _, data in records) + b"]")
    return fold_records(zip((message_id for message_id, _ in records), messages, strict=True))


def first_versions(batch: Sequence[_R], known: Container[str]) -> list[_R]:
    """The records of an append that are first records: their id was not `known` before it (the first of an id
    repeated in the batch)."""
    firsts: list[_R] = []
    met = set[str]()
    for record in batch:
        if record.message_id not in known and record.message_id not in met:
            met.add(record.message_id)
            firsts.append(record)
    return firsts


def _time_of(message: ModelMessage) -> datetime | None:
    """When `message` was made: its timestamp, else (a request built by hand) its first part's."""
    if message.timestamp is not None:
        return message.timestamp
    return next((t for part in message.parts if (t := getattr(part, "timestamp", None)) is not None), None)


def as_bytes(value: object) -> bytes:
    """A stored catalogue column as bytes (a row written by hand, or by another format, may hold text)."""
    return value.encode() if isinstance(value, str) else bytes(cast(bytes, value))


def _parts(shown: bytes) -> tuple[dict[str, Any], bytes] | None:
    """(view, pickled totals) of the first part of a dumped fold of this format, else `None`."""
    head, _, rest = shown.partition(b"\n")
    try:
        view_length = int(head)
        view = json.loads(rest[:view_length])
    except ValueError:
        return None
    if not isinstance(view, dict):
        return None
    found = cast(dict[str, Any], view)
    if found.get("format") != [_FORMAT, _ledger().fingerprint()]:
        return None
    return found, rest[view_length:]


@cache
def _ledger():
    """`_catalog_ledger`, imported on first use (it imports the cost package, which imports this one)."""
    from . import _catalog_ledger

    return _catalog_ledger


def _time(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _model_label(response: ModelResponse) -> str:
    from ..cost._pricing import model_label

    return model_label(response.model_name, response.provider_name)
