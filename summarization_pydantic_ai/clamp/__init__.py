"""`ClampOversizedParts`: cut a single oversized part (a runaway response, giant tool-call arguments, a huge tool
return, a user prompt larger than the window) to its head and tail as it enters the history."""

from ..context_manager._clamp import CLAMPED_METADATA_KEY, PART_KINDS, PartKind
from ._capability import ClampOversizedParts

__all__ = ["CLAMPED_METADATA_KEY", "PART_KINDS", "ClampOversizedParts", "PartKind"]
