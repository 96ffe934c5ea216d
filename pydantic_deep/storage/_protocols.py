"""What the harness keeps besides histories, behind protocols: agent memory and checkpoints."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..checkpoints._protocol import CheckpointStore

__all__ = ["CheckpointStore", "MemoryStore", "SessionMetadataStore", "StorageError"]


class StorageError(RuntimeError):
    """A storage cannot do what was asked (unreachable database, unwritable file); the message says where."""


@runtime_checkable
class MemoryStore(Protocol):
    """The memories (MEMORY.md texts) of the agents of one storage, by agent name.

    Writers never lose each other's edits: `compare_and_swap` writes only if the memory is still what the writer
    read (`AgentMemoryToolset` reads, changes, and retries on `False`).
    """

    @property
    def url(self) -> str:
        """Where the memories are (any password redacted)."""
        ...

    async def read(self, agent_name: str) -> str | None:
        """The memory of `agent_name`; `None` while it was never written."""
        ...

    async def compare_and_swap(self, agent_name: str, expected: str | None, content: str) -> bool:
        """Set the memory to `content` if it is `expected` now (`None`: not written yet); `False` otherwise."""
        ...

    async def names(self) -> list[str]:
        """The agents with a memory."""
        ...


@runtime_checkable
class SessionMetadataStore(Protocol):
    """What `SessionManager` records of each session besides its history (`created`, `forked_from`, ...): small
    string maps, by session id. Sync (called from a worker thread)."""

    def get(self, session_id: str) -> dict[str, str] | None:
        """The session's metadata; `None` when none was recorded."""
        ...

    def create(self, session_id: str, data: dict[str, str]) -> bool:
        """Record `data` for a session that has none yet; `False` (nothing written) when it has: one winner."""
        ...

    def delete(self, session_id: str) -> None: ...

    def ids(self) -> list[str]:
        """The sessions with metadata."""
        ...
