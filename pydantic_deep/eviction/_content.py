"""What an evicted output is saved as and previewed with: text, raw bytes, data; never multimodal content."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

import pydantic_core
from pydantic_ai.messages import BinaryContent, FileUrl, ModelMessage, ModelRequest, ToolReturnPart

from ..backends import BackendProtocol
from ._policy import EVICTION_METADATA_KEY

__all__ = ["as_text", "evicted_paths", "evicted_text", "pageable", "printable", "referenced_paths"]


_MEDIA = (BinaryContent, FileUrl)
"""Images, audio, video and documents (inline or by URL): the model reads them as they are, never as text."""


def _has_media(value: Any, depth: int = 0) -> bool:
    if isinstance(value, _MEDIA):
        return True
    if depth > 4:
        return False
    if isinstance(value, list | tuple):
        return any(_has_media(v, depth + 1) for v in cast("Sequence[Any]", value))
    if isinstance(value, dict):
        return any(_has_media(v, depth + 1) for v in cast("dict[Any, Any]", value).values())
    return False


def as_text(value: Any) -> str | None:
    """The text an output is saved as: strings as they are, raw bytes with every byte kept (undecodable ones as
    surrogate escapes, which a disk backend writes back as the same bytes), data as indented JSON (pageable by
    lines). Multimodal content is never turned into text: the model gets it as it is."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "surrogateescape")
    if _has_media(value):
        return None
    try:
        return json.dumps(pydantic_core.to_jsonable_python(value), indent=1, ensure_ascii=False)
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
        return None  # multimodal or opaque objects are left alone


_PAGEABLE_LINE = 2_000


def printable(text: str) -> str:
    """`text` for a preview: undecodable bytes (surrogate escapes) shown as U+FFFD, or, when most of it is binary,
    a hex dump of its first bytes (a history must never hold a lone surrogate: it cannot be serialized)."""
    if text.isascii() or not any("\udc80" <= c <= "\udcff" for c in text):
        return text
    raw = text.encode("utf-8", "surrogateescape")
    decoded = raw.decode("utf-8", "replace")
    if decoded.count("\ufffd") * 10 <= len(decoded):
        return decoded
    head = raw[:512]
    rows = (head[k : k + 16].hex(" ") for k in range(0, len(head), 16))
    return f"[binary data, {len(raw):,} bytes; the first {len(head)} in hex:]\n" + "\n".join(rows)


def evicted_paths(message: ModelMessage) -> list[str]:
    """The evicted files that the previews in `message` point to."""
    paths: list[str] = []
    for part in message.parts:
        metadata: Any = part.metadata if isinstance(part, ToolReturnPart) else None
        info: Any = cast(dict[str, Any], metadata).get(EVICTION_METADATA_KEY) if isinstance(metadata, dict) else None
        if isinstance(info, dict) and isinstance(path := cast(dict[str, Any], info).get("path"), str):
            paths.append(path)
    return paths


async def evicted_text(message: ModelMessage, backend: BackendProtocol) -> str:
    """The full text of the outputs the previews in `message` point to, read from `backend`, as the history search
    indexes it with the message ('' when it has none; an output cleaned up since is skipped)."""
    texts: list[str] = []
    for path in evicted_paths(message):
        try:
            texts.append(f"Evicted output {path}:\n{await backend.read(path)}")
        except (OSError, PermissionError):
            continue
    return "\n".join(texts)


def referenced_paths(messages: Sequence[ModelMessage]) -> list[str]:
    """The evicted files that previews in `messages` point to."""
    return [path for message in messages if isinstance(message, ModelRequest) for path in evicted_paths(message)]


def pageable(text: str, kind: str) -> str:
    """JSON on one long line is saved indented, so `read_file` can page through it line by line."""
    if kind != "json" or max(map(len, text.splitlines() or [""])) <= _PAGEABLE_LINE:
        return text
    try:
        return json.dumps(json.loads(text), indent=1, ensure_ascii=False)
    except ValueError:
        return text
