"""The compression levels of `MessageCompressor`: how big a tool return must be before it is compressed and
how hard each compressor cuts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, TypeAlias

from .._tool_patterns import DEFAULT_CONSOLE_TOOLS, DEFAULT_SNAPSHOT_TOOLS

__all__ = ["DEFAULT_CONSOLE_TOOLS", "DEFAULT_SNAPSHOT_TOOLS", "LEVELS", "CompressionLevel", "LevelSettings"]

CompressionLevel: TypeAlias = Literal["none", "low", "medium", "high"]
"""How hard `MessageCompressor` compresses (see `LEVELS`); also `ContextConfig.compression_level`."""


@dataclass(frozen=True, slots=True)
class LevelSettings:
    """What one level does.

    `routed_min_chars`: a return of a snapshot or console tool is compressed from this size;
    `min_chars`: the return of any other tool from this size (by its detected kind);
    `snapshot_depth`, `snapshot_text_chars`, `snapshot_images`, `log_head` / `log_tail`, `json_items`: the
    compressors' settings;
    `max_chars`: what plain text (and content no structural compressor could reduce) is truncated to.
    """

    routed_min_chars: int
    min_chars: int
    snapshot_depth: int
    snapshot_text_chars: int | None
    snapshot_images: bool
    log_head: int
    log_tail: int
    json_items: int
    max_chars: int


LEVELS: Mapping[CompressionLevel, LevelSettings | None] = MappingProxyType(
    {
        "none": None,
        "low": LevelSettings(
            routed_min_chars=8_000,
            min_chars=32_000,
            snapshot_depth=10,
            snapshot_text_chars=None,
            snapshot_images=True,
            log_head=20,
            log_tail=100,
            json_items=10,
            max_chars=32_000,
        ),
        "medium": LevelSettings(
            routed_min_chars=2_000,
            min_chars=8_000,
            snapshot_depth=6,
            snapshot_text_chars=80,
            snapshot_images=False,
            log_head=10,
            log_tail=40,
            json_items=5,
            max_chars=8_000,
        ),
        "high": LevelSettings(
            routed_min_chars=1_000,
            min_chars=2_000,
            snapshot_depth=4,
            snapshot_text_chars=60,
            snapshot_images=False,
            log_head=5,
            log_tail=20,
            json_items=3,
            max_chars=2_000,
        ),
    }
)
"""`none` compresses nothing; `low` only very large outputs, gently; `high` everything above 2,000 characters.
Read-only: to tune a level, pass `snapshot_depth` to `MessageCompressor` or call the compressors directly."""
