"""JSON previews: the document's shape (type, top-level keys with their value types and share of the size,
array lengths, the keys records share, nesting depth) and its first items, abbreviated. JSON lines (one
document per line) are parsed here and previewed by `_jsonl`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ._common import ELLIPSIS, Section, assemble, clip, fmt_int, plural, split_lines, wrap

__all__ = [
    "JsonDoc",
    "abbreviate",
    "collection_sections",
    "json_preview",
    "main_collection",
    "parse_json",
    "record_key_lines",
    "type_name",
]

_LEADING_WS = re.compile(r"[ \t\r\n]*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_NODES = 300_000
"""Depth and value counts stop after this many values (reported as `≥`)."""
_MAX_RECORDS = 20_000
"""JSON lines: records parsed beyond this are only counted."""
_KEY_SAMPLE = 5_000
"""Items looked at when collecting the keys of a collection of records."""
_SHARE_MAX_KEYS = 200
"""Above this many top-level keys, no size shares are computed."""


@dataclass(slots=True)
class JsonDoc:
    """A parsed JSON document (`value`), or JSON lines (`records`, the parsed ones, from the 1-based lines
    `record_lines`; `record_count` counts all non-empty lines, `bad_lines` numbers those that are not JSON)."""

    value: Any = None
    records: list[Any] | None = None
    record_lines: list[int] = field(default_factory=list[int])
    record_count: int = 0
    bad_lines: list[int] = field(default_factory=list[int])


def parse_json(content: str) -> JsonDoc | None:
    """`content` parsed as a JSON object or array, or as JSON lines (at least two lines, the first twenty all
    objects or arrays); `None` when it is neither (scalars do not count: `"42"` is text)."""
    if content.startswith("\ufeff"):
        content = content[1:]
    start = _LEADING_WS.match(content)
    first = content[start.end() : start.end() + 1] if start else content[:1]
    if first not in ("{", "["):
        return None
    try:
        value = json.loads(content)
    except json.JSONDecodeError as error:
        return _parse_json_lines(content) if error.msg == "Extra data" else None
    except (ValueError, RecursionError, TypeError):
        return None
    if isinstance(value, dict | list):
        return JsonDoc(value=value)
    return None


def _loads_container(line: str) -> tuple[bool, Any]:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError, TypeError):
        return False, None
    return isinstance(value, dict | list), value


def _parse_json_lines(content: str) -> JsonDoc | None:
    records: list[Any] = []
    numbers: list[int] = []
    bad: list[int] = []
    count = 0
    for number, line in enumerate(split_lines(content), start=1):
        if not line.strip():
            continue
        count += 1
        if count > _MAX_RECORDS:
            continue
        ok, value = _loads_container(line)
        if ok:
            records.append(value)
            numbers.append(number)
        else:
            if count <= 20:
                return None  # the head must be clean for this to be JSON lines
            bad.append(number)
    if count < 2:
        return None
    return JsonDoc(records=records, record_lines=numbers, record_count=count, bad_lines=bad)


# --- describing values --------------------------------------------------------------------------------------


_TYPE_NAMES: dict[type[Any], str] = {
    dict: "object",
    list: "array",
    str: "str",
    int: "int",
    float: "float",
    bool: "bool",
    type(None): "null",
}


_CONTAINERS = (dict, list)


def type_name(value: Any) -> str:
    """The JSON type of a parsed value: `object`, `array`, `str`, `int`, `float`, `bool` or `null`."""
    cls: type[Any] = value.__class__
    return _TYPE_NAMES.get(cls) or cls.__name__


def _as_dict(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value)


def _as_list(value: Any) -> list[Any]:
    return cast(list[Any], value)


def _key(key: str, limit: int = 40) -> str:
    return json.dumps(clip(key, limit), ensure_ascii=False)


def _path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if _IDENT.match(key) else f"{parent}[{_key(key)}]"


def _scalar(value: Any, limit: int = 40) -> str:
    if isinstance(value, str):
        if len(value) <= limit:
            return json.dumps(value, ensure_ascii=False)
        return json.dumps(value[: limit - 1], ensure_ascii=False)[:-1] + ELLIPSIS + '"'
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, float):
        return clip(repr(value), limit)
    return clip(str(value), limit)


def abbreviate(value: Any, depth: int = 0) -> str:
    """A short JSON-like rendering: long strings cut, at most 8 keys (4 when nested) and 3 items per level, two
    levels deep."""
    if isinstance(value, dict):
        obj = _as_dict(value)
        if not obj:
            return "{}"
        if depth >= 2:
            return "{" + ELLIPSIS + plural(len(obj), "key") + "}"
        keys = 8 if depth == 0 else 4
        parts = [f"{_key(k, 30)}: {abbreviate(v, depth + 1)}" for k, v in list(obj.items())[:keys]]
        if len(obj) > keys:
            parts.append(f"{ELLIPSIS}+{len(obj) - keys}")
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list):
        arr = _as_list(value)
        if not arr:
            return "[]"
        if depth >= 2:
            return "[" + ELLIPSIS + fmt_int(len(arr)) + "]"
        parts = [abbreviate(v, depth + 1) for v in arr[:3]]
        if len(arr) > 3:
            parts.append(f"{ELLIPSIS}+{len(arr) - 3}")
        return "[" + ", ".join(parts) + "]"
    return _scalar(value)


def _types_of(values: Sequence[Any], limit: int = 10_000) -> dict[str, int]:
    counts: dict[str, int] = {}
    names = _TYPE_NAMES
    for v in values[:limit]:
        name = names.get(v.__class__, "other")
        counts[name] = counts.get(name, 0) + 1
    return counts


def _type_mix(counts: dict[str, int]) -> str:
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])
    return "|".join(name for name, _ in ordered[:4]) + ("|…" if len(ordered) > 4 else "")


def shape(value: Any) -> str:
    """One-phrase shape: `array[1,500] of object`, `object{3 keys: a, b, c}`, `str(2,345 chars)`, `int 12`."""
    if isinstance(value, dict):
        obj = _as_dict(value)
        names = ", ".join(clip(k, 20) for k in list(obj)[:5]) + (", …" if len(obj) > 5 else "")
        return f"object{{{plural(len(obj), 'key')}{': ' + names if obj else ''}}}"
    if isinstance(value, list):
        arr = _as_list(value)
        if not arr:
            return "array[0]"
        return f"array[{fmt_int(len(arr))}] of {_type_mix(_types_of(arr))}"
    if isinstance(value, str):
        if len(value) <= 60:
            return f"str {_scalar(value, 60)}"
        return f"str({fmt_int(len(value))} chars) {_scalar(value, 40)}"
    if value is None:
        return "null"
    return f"{type_name(value)} {_scalar(value)}"


def _measure(value: Any) -> tuple[int, int, bool]:
    """(container nesting depth, number of values, stopped early) without recursion."""
    depth = 1
    nodes = 1
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        depth = max(depth, level)
        children: Any = item.values() if item.__class__ is dict else item
        nodes += len(children)
        stack.extend((child, level + 1) for child in children if child.__class__ in _CONTAINERS)
        if nodes > _MAX_NODES:
            return depth, nodes, True
    return depth, nodes, False


def record_key_lines(items: Sequence[Any], width: int = 110) -> tuple[int, list[str]]:
    """(objects seen, wrapped `key:type` lines) over the first items of a collection; keys missing from some
    objects show how many have them."""
    seen = 0
    types: dict[str, dict[str, int]] = {}
    names = _TYPE_NAMES
    for item in items[:_KEY_SAMPLE]:
        if item.__class__ is not dict:
            continue
        seen += 1
        for k, v in item.items():
            per = types.get(k)
            if per is None:
                per = types[k] = {}
            name = names.get(v.__class__, "other")
            per[name] = per.get(name, 0) + 1
        if len(types) > 500:
            break
    parts: list[str] = []
    for k, per in types.items():
        n = sum(per.values())
        part = f"{clip(str(k), 40)}:{_type_mix(per)}"
        if n != seen:
            part += f" ({fmt_int(n)}/{fmt_int(seen)})"
        parts.append(part)
    return seen, wrap(parts, width)


def _item_lines(items: Sequence[Any], numbers: Sequence[int] | None, indexes: Sequence[int]) -> list[str]:
    if numbers is None:
        return [f"  [{i}] {abbreviate(items[i])}" for i in indexes]
    width = len(str(numbers[indexes[-1]])) if indexes else 1
    return [f"{numbers[i]:>{width}}| {abbreviate(items[i])}" for i in indexes]


def main_collection(obj: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """The longest array within three levels of objects under the root (the payload of `{"data": [...]}`)."""
    best: tuple[str, list[Any]] | None = None
    frontier: list[tuple[str, dict[str, Any]]] = [("$", obj)]
    for _ in range(3):
        nxt: list[tuple[str, dict[str, Any]]] = []
        for path, node in frontier:
            for k, v in list(node.items())[:200]:
                if isinstance(v, list):
                    arr = _as_list(v)
                    if arr and (best is None or len(arr) > len(best[1])):
                        best = (_path(path, k), arr)
                elif isinstance(v, dict):
                    nxt.append((_path(path, k), _as_dict(v)))
        if best is not None and len(best[1]) >= 2:
            return best
        frontier = nxt[:200]
    return best


def collection_sections(
    label: str, items: list[Any], budget: int, numbers: Sequence[int] | None = None, *, first: int = 3, last: int = 1
) -> list[Section]:
    """The keys the items share and the `first` items (plus the `last` ones) of a collection, shown by index
    or, given `numbers`, by line number."""
    sections: list[Section] = []
    types = _types_of(items)
    mix = ", ".join(f"{fmt_int(n)} {name}" for name, n in sorted(types.items(), key=lambda kv: -kv[1])[:6])
    seen, key_lines = record_key_lines(items)
    if key_lines:
        of = f" (keys of the first {fmt_int(seen)} objects)" if seen < types.get("object", 0) else ""
        sections.append(Section(key_lines, "head", f"{label} item keys{of}:", floor=budget // 5))
    head = min(first, len(items))
    tail = min(last, len(items) - head)
    indexes = [*range(head), *range(len(items) - tail, len(items))]
    lines = _item_lines(items, numbers, indexes)
    ends = f"first {head}" + (f" and the last {tail}" if tail > 1 else " and the last" if tail else "")
    how = " (line| record)" if numbers is not None else ""
    title = f"{label}: {plural(len(items), 'item')} ({mix}); {ends}{how}:"
    sections.append(Section(lines, "head", title, floor=budget // 3))
    return sections


def json_preview(doc: JsonDoc, length: int, max_chars: int) -> str:
    """The preview of a parsed document (not JSON lines); `length` is the raw content's size."""
    value = doc.value
    depth, nodes, cut = _measure(value)
    facts = f"nesting depth {'≥' if cut else ''}{depth}, {'≥' if cut else ''}{plural(nodes, 'value')}"
    if isinstance(value, list):
        arr = _as_list(value)
        header = f"JSON array, {plural(len(arr), 'item')}, {plural(length, 'char')}"
        return assemble(header, [facts], collection_sections("items", arr, max_chars), max_chars)
    obj = _as_dict(value)
    header = f"JSON object, {plural(len(obj), 'key')}, {plural(length, 'char')}"
    key_lines: list[str] = []
    shares: dict[str, int] = {}
    if len(obj) <= _SHARE_MAX_KEYS:
        for k, v in obj.items():
            try:
                shares[k] = len(json.dumps(v, ensure_ascii=False)) if isinstance(v, dict | list | str) else 0
            except (ValueError, TypeError, RecursionError):
                shares[k] = 0
    whole = sum(shares.values()) or 1
    for k, v in list(obj.items())[:500]:
        share = shares.get(k, 0)
        pct = f" ({share * 100 // whole}%)" if share * 100 >= whole else ""
        key_lines.append(f"  {_key(k)}: {shape(v)}{pct}")
    if len(obj) > 500:
        key_lines.append(f"  {ELLIPSIS} +{fmt_int(len(obj) - 500)} more keys")
    title = "top-level keys (share of the size):" if shares else "top-level keys:"
    sections = [Section(key_lines, "head", title, floor=max_chars * 2 // 5)]
    main = main_collection(obj)
    if main is not None and len(main[1]) >= 2:
        sections += collection_sections(main[0], main[1], max_chars)
    elif len(obj) > 20:
        sections += collection_sections("values", list(obj.values()), max_chars)
    return assemble(header, [facts], sections, max_chars)
