"""The `CheckpointStore` protocol: what `CheckpointMiddleware` needs of the place checkpoints are kept."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ._store import Checkpoint

__all__ = ["CheckpointStore"]


@runtime_checkable
class CheckpointStore(Protocol):
    """The checkpoints of one session (pointers into its history), as `FileCheckpointStore` keeps them.

    Sync: `CheckpointMiddleware` calls it from a worker thread.
    """

    @property
    def session_id(self) -> str: ...

    def list(self) -> list[Checkpoint]:
        """The checkpoints, oldest first."""
        ...

    def get(self, checkpoint_id: str) -> Checkpoint:
        """`CheckpointNotFoundError` when there is none with that id."""
        ...

    def save(self, checkpoint: Checkpoint) -> None:
        """Add `checkpoint` (or replace the one with its id)."""
        ...

    def delete(self, checkpoint_id: str) -> None: ...

    def prune(self, keep: int) -> int:
        """Delete the oldest automatic checkpoints beyond the newest `keep`; returns how many."""
        ...
