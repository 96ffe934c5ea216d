"""Checkpoints: points of a session's history to rewind to, kept as message ids (never copies) in
`<session_dir>/checkpoints.json`."""

from ._middleware import CheckpointMiddleware
from ._store import (
    Checkpoint,
    CheckpointError,
    CheckpointNotFoundError,
    FileCheckpointStore,
    InvalidCheckpointIdError,
    validate_checkpoint_id,
)

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointMiddleware",
    "CheckpointNotFoundError",
    "FileCheckpointStore",
    "InvalidCheckpointIdError",
    "validate_checkpoint_id",
]
