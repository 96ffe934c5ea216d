"""`PatchToolCalls`: pair every tool call with exactly one result before a strict provider sees the history."""

from ._processor import INTERRUPTED_RESULT_CONTENT, PATCH_METADATA_KEY, PLACEHOLDER_PROMPT, PatchToolCalls

__all__ = [
    "INTERRUPTED_RESULT_CONTENT",
    "PATCH_METADATA_KEY",
    "PLACEHOLDER_PROMPT",
    "PatchToolCalls",
]
