"""State of `AgentDrivenCompression`: one attempt, one run, and what a run left unfinished for the next one."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from ._memory_file import Snapshot

__all__ = ["Attempt", "Carried", "CompressionRunState", "Unfinished"]

_MAX_UNFINISHED = 1_000


@dataclass
class Attempt:
    number: int
    baseline: Snapshot
    """The memory file as it was when the attempt began: written means changed since."""
    requests: int = 0
    """Model requests that carried the compression request in this attempt."""


@dataclass
class Carried:
    """A compression a run ended in the middle of (the agent answered instead of calling `compression_complete`)."""

    attempts: int = 0
    """Attempts already failed."""
    memory: str | None = None
    """Memory verified but not yet injected."""
    fallback: str | None = None


@dataclass
class CompressionRunState:
    armed: bool = True
    restored: bool = False
    """Whether what an earlier run of the conversation left unfinished was taken over (at the first request)."""
    attempt: Attempt | None = None
    memory: str | None = None
    """The verified memory, injected at the next model request."""
    fallback: str | None = None
    """Why every attempt failed: compact algorithmically at the next model request."""
    failed_before: int = 0
    """Attempts that failed in earlier runs of this conversation."""
    tokens: int = 0
    budget: int = 1
    attempts_used: int = 0

    def unfinished(self) -> Carried | None:
        """What the next run of the conversation must take over, if anything."""
        if self.memory is not None or self.fallback is not None:
            return Carried(self.attempts_used, self.memory, self.fallback)
        if self.attempt is not None:
            return Carried(self.attempt.number)
        return None


class Unfinished:
    """Compressions left unfinished, by conversation id, for the conversation's next run: an agent that answers
    instead of writing its memory ends the run, and its attempts must still count (bounded: oldest dropped)."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, Carried] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, conversation_id: str, carried: Carried) -> None:
        with self._lock:
            self._items[conversation_id] = carried
            self._items.move_to_end(conversation_id)
            while len(self._items) > _MAX_UNFINISHED:
                self._items.popitem(last=False)

    def take(self, conversation_id: str) -> Carried | None:
        with self._lock:
            return self._items.pop(conversation_id, None)
