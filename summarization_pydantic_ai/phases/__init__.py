"""Phase checkpoints: rebuild the context as the original instructions plus one checkpoint per completed phase."""

from ._capability import PhaseCheckpoints
from ._checkpoint import CHECKPOINT_KIND, CompletedPhase

__all__ = ["CHECKPOINT_KIND", "CompletedPhase", "PhaseCheckpoints"]
