"""What `EvictionProcessor` remembers between the requests of one run: the history it saw (a cursor that
judges in-place edits by requests only), the agent-mode outputs still pending, and where its previews are."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic_ai.messages import ModelMessage, ModelResponse

from summarization_pydantic_ai import HistoryCursor

__all__ = ["RunState"]

_UNREAD: tuple[object, ...] = ()
"""The fingerprint of every response for the eviction cursor (never `None`: that marks "not fingerprinted")."""


class _RequestCursor(HistoryCursor):
    """A `HistoryCursor` that judges in-place edits by requests only: eviction reads nothing in a response (tool
    outputs live in requests), so a response edited in place needs no new visit, and its fingerprint (half the
    tail check of every request) is not taken."""

    __slots__ = ()

    @staticmethod
    def _fingerprint_of(
        message: ModelMessage, _of_request: Callable[[ModelMessage], tuple[object, ...]] = HistoryCursor._fingerprint_of
    ) -> tuple[object, ...]:
        return _UNREAD if message.__class__ is ModelResponse else _of_request(message)


@dataclass
class RunState:
    cursor: HistoryCursor = field(default_factory=lambda: _RequestCursor(fingerprint_all=False))
    """The history as it was after the previous request: only what changed since is examined (never with
    `verify=True`, so only the checked tail is fingerprinted)."""
    pending: dict[str, int] = field(default_factory=dict[str, int])
    """Agent-mode outputs not archived yet: tool_call_id -> index of the request holding them."""
    previews: dict[str, list[tuple[int, int]]] = field(default_factory=dict[str, list[tuple[int, int]]])
    """Where the history's previews are: evicted file path -> (request index, part index) of each."""
