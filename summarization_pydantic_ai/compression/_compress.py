"""JSON compression (shape + first items), generic head/tail truncation, and `compress`, which picks the
compressor for the kind of content it is given."""

from __future__ import annotations

import json
from typing import Any, Literal, cast

from .._estimate import CHARS_PER_TOKEN
from ..context_manager._truncate import truncate_text
from ._common import ELLIPSIS, fmt_int, plural
from ._compress_log import compress_log
from ._compress_snapshot import DEFAULT_SNAPSHOT_DEPTH, compress_snapshot
from ._json import main_collection, parse_json, record_key_lines
from ._previews import detect_kind
from ._result import MARK, CompressionKind, CompressionResult, finish, is_compressed, unchanged

__all__ = ["compress", "compress_json", "compress_text"]


def _prune(value: Any, items: int, max_string: int, max_keys: int, depth: int) -> Any:
    """`value` with arrays cut to their first `items`, objects to `max_keys` keys and strings to `max_string`
    characters; below `depth` levels a container becomes a short description of itself."""
    if isinstance(value, str):
        if len(value) <= max_string:
            return value
        return value[:max_string] + f"{ELLIPSIS}(+{fmt_int(len(value) - max_string)} chars)"
    if isinstance(value, list):
        arr = cast(list[Any], value)
        if depth <= 0 and arr:
            return f"{ELLIPSIS}array of {plural(len(arr), 'item')}"
        kept = [_prune(v, items, max_string, max_keys, depth - 1) for v in arr[:items]]
        if len(arr) > items:
            kept.append(f"{ELLIPSIS}+{fmt_int(len(arr) - items)} more items")
        return kept
    if isinstance(value, dict):
        obj = cast(dict[str, Any], value)
        if depth <= 0 and obj:
            return f"{ELLIPSIS}object of {plural(len(obj), 'key')}"
        pruned = {k: _prune(v, items, max_string, max_keys, depth - 1) for k, v in list(obj.items())[:max_keys]}
        if len(obj) > max_keys:
            pruned[ELLIPSIS] = f"+{fmt_int(len(obj) - max_keys)} more keys"
        return pruned
    return value


def _shape(value: Any) -> str:
    """The main collection of a document: where it is, how long, and the keys its records have."""
    if isinstance(value, list):
        path, items = "$", cast(list[Any], value)
    else:
        found = main_collection(cast(dict[str, Any], value)) if isinstance(value, dict) else None
        if found is None:
            return ""
        path, items = found
    _, key_lines = record_key_lines(items, width=10_000)
    keys = key_lines[0].strip() if key_lines else ""
    return f"; {path}: {plural(len(items), 'item')}" + (f", keys: {keys}" if keys else "")


def compress_json(
    content: str, *, items: int = 5, max_string: int = 200, max_keys: int = 50, depth: int = 8
) -> CompressionResult:
    """Compress a JSON document to its shape and first items: every array cut to its first `items` items (then a
    `"…+N more items"` string), objects to their first `max_keys` keys, strings to `max_string` characters,
    containers below `depth` levels to a description. The first line names the main collection, its length
    and the keys its records have (with how many have each). The rest is compact JSON.

    JSON lines are compressed as a log (head, tail and error records). Text that is not JSON is truncated
    (`compress_text`). Deterministic and idempotent.

        >>> rows = ", ".join(f'{{"id": {i}, "name": "user {i}"}}' for i in range(100))
        >>> result = compress_json('{"data": [' + rows + '], "total": 100}', items=2)
        >>> result.chars_before, result.chars_after
        (3104, 205)
        >>> print(result.text)  # doctest: +NORMALIZE_WHITESPACE
        [compressed JSON: 3,104 → 205 chars; arrays cut to their first 2 items;
         $.data: 100 items, keys: id:int, name:str]
        {"data":[{"id":0,"name":"user 0"},{"id":1,"name":"user 1"},"…+98 more items"],"total":100}
    """
    for name, value in (("items", items), ("max_string", max_string), ("max_keys", max_keys), ("depth", depth)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if is_compressed(content):
        return unchanged(content, "json")
    doc = parse_json(content)
    if doc is None:
        return compress_text(content)
    if doc.records is not None:
        return compress_log(content)
    try:
        pruned = _prune(doc.value, items, max_string, max_keys, depth)
        body = json.dumps(pruned, ensure_ascii=False, separators=(",", ":"))
    except (ValueError, RecursionError):  # nested beyond what the encoder takes: text it is
        return compress_text(content)
    shape = _shape(doc.value)

    def header(size: int) -> str:
        return (
            f"{MARK}JSON: {fmt_int(len(content))} → {fmt_int(size)} chars; arrays cut to their first "
            f"{plural(items, 'item')}{shape}]"
        )

    return finish(content, "json", body, header)


def compress_text(content: str, *, max_chars: int = 8_000) -> CompressionResult:
    """Truncate text to about `max_chars` characters: its head and tail lines, with a one-line note in the
    middle of what was dropped (lines and tokens). Text within the budget comes back unchanged, which makes
    this idempotent."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    text, cut = truncate_text(content, max(1, max_chars // CHARS_PER_TOKEN))
    if cut is None:
        return unchanged(content, "text")
    return CompressionResult(text, "text", len(content), len(text))


def _marked_kind(content: str) -> CompressionKind | None:
    for kind, word in (("snapshot", "snapshot"), ("log", "log"), ("json", "JSON")):
        if content.startswith(f"{MARK}{word}"):
            return cast(CompressionKind, kind)
    return None


def compress(
    content: str,
    kind: Literal["auto"] | CompressionKind = "auto",
    *,
    snapshot_depth: int = DEFAULT_SNAPSHOT_DEPTH,
    snapshot_text_chars: int | None = None,
    snapshot_images: bool = True,
    log_head: int = 10,
    log_tail: int = 40,
    json_items: int = 5,
    max_chars: int = 8_000,
) -> CompressionResult:
    """Compress `content` with the compressor for its kind: `auto` detects it (snapshots, logs, JSON; CSV and
    anything else are text). When the structural compressor removes nothing (a "snapshot" that is not one, a
    short log), the content is truncated as text to `max_chars` instead. A structural result is not cut
    further: it already keeps what the model needs (every interactive element, every error line).

        >>> compress('{"rows": [' + ", ".join(str(i) for i in range(1000)) + "]}").kind
        'json'
    """
    if is_compressed(content):
        return unchanged(content, _marked_kind(content) or "text")
    if kind == "auto":
        detected = detect_kind(content)
        kind = detected if detected in ("snapshot", "log", "json") else "text"  # csv: text
    if kind == "snapshot":
        result = compress_snapshot(
            content, depth=snapshot_depth, text_chars=snapshot_text_chars, images=snapshot_images
        )
    elif kind == "log":
        result = compress_log(content, head=log_head, tail=log_tail)
    elif kind == "json":
        result = compress_json(content, items=json_items)
    else:
        return compress_text(content, max_chars=max_chars)
    return result if result.changed else compress_text(content, max_chars=max_chars)
