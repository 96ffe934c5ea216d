"""Importance pruning: drop the least important messages until the context fits, with no model call."""

from ._pruner import MERGED_METADATA_KEY, ImportancePruner
from ._scoring import DEFAULT_STATE_CHANGE_TOOLS, ImportanceScore, ImportanceWeights

__all__ = [
    "DEFAULT_STATE_CHANGE_TOOLS",
    "MERGED_METADATA_KEY",
    "ImportancePruner",
    "ImportanceScore",
    "ImportanceWeights",
]
