"""Zero-LLM, structure-aware reduction of tool outputs — one body of knowledge for two uses.

- **Compressors** (`compress_snapshot`, `compress_log`, `compress_json`, `compress_text`, and `compress`, which
  picks one by the detected kind) shrink content that stays in the working context. Pure, deterministic and
  idempotent; each reports its size before and after (`CompressionResult`).
- **`MessageCompressor`** applies them to the tool returns of a history, by tool name and size, at a level
  (`none | low | medium | high`, see `LEVELS`).
- **Previews** (`make_preview`, `detect_kind`) are bounded descriptions of content saved elsewhere; the
  harness's eviction shows them in place of an evicted output.
"""

from ._compress import compress, compress_json, compress_text
from ._compress_log import compress_log
from ._compress_snapshot import DEFAULT_SNAPSHOT_DEPTH, compress_snapshot
from ._levels import DEFAULT_CONSOLE_TOOLS, DEFAULT_SNAPSHOT_TOOLS, LEVELS, CompressionLevel, LevelSettings
from ._message_compressor import COMPRESSED_METADATA_KEY, MessageCompressor
from ._previews import PreviewKind, detect_kind, make_preview
from ._result import CompressionKind, CompressionResult

__all__ = [
    "COMPRESSED_METADATA_KEY",
    "DEFAULT_CONSOLE_TOOLS",
    "DEFAULT_SNAPSHOT_DEPTH",
    "DEFAULT_SNAPSHOT_TOOLS",
    "LEVELS",
    "CompressionKind",
    "CompressionLevel",
    "CompressionResult",
    "LevelSettings",
    "MessageCompressor",
    "PreviewKind",
    "compress",
    "compress_json",
    "compress_log",
    "compress_snapshot",
    "compress_text",
    "detect_kind",
    "make_preview",
]
