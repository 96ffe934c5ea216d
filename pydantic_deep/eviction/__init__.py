"""Eviction: large tool outputs saved through the backend, replaced by structure-aware previews."""

from summarization_pydantic_ai.compression import PreviewKind, detect_kind, make_preview

from ._indexing import EvictedOutputIndexer
from ._policy import (
    EVICTION_METADATA_KEY,
    MCP_POLICY,
    EvictionFailed,
    EvictionPolicy,
    OutputArchived,
    OutputEvicted,
    RetentionPolicy,
    safe_file_id,
)
from ._processor import EvictionProcessor
from ._store import EvictionArchive

__all__ = [
    "EVICTION_METADATA_KEY",
    "MCP_POLICY",
    "EvictedOutputIndexer",
    "EvictionArchive",
    "EvictionFailed",
    "EvictionPolicy",
    "EvictionProcessor",
    "OutputArchived",
    "OutputEvicted",
    "PreviewKind",
    "RetentionPolicy",
    "detect_kind",
    "make_preview",
    "safe_file_id",
]
