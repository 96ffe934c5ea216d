"""The record framing of messages.json (format 2): one record per line, each carrying a CRC-32 of its own bytes.

```
[
{"parts":[...],"kind":"request","metadata":{...},...,"crc32":"1c291ca3"},
{"parts":[...],"kind":"response",...,"crc32":"9a0b2c4d"}
]
```

A record is a pydantic-ai message in its JSON form with one more key, `crc32`: the CRC-32 (8 lowercase hex digits)
of the record's bytes before `,"crc32"`. pydantic ignores the extra key, so the whole file still loads with
`ModelMessagesTypeAdapter.validate_json`. A reader checks every record on its own: a damaged record is skipped and
the next one is found again (at the next line, or at the next `{"parts":` that starts a record whose checksum
holds). Records without a checksum (format 1, written before it existed) are accepted when they parse.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_core import PydanticSerializationError

from .._messages import MESSAGE_ID_KEY, SUMMARY_METADATA_KEY

__all__ = [
    "FOOTER",
    "HEADER",
    "Damage",
    "Record",
    "Scan",
    "clean_summary",
    "encode",
    "reframed",
    "repaired",
    "scan",
    "scan_line",
]

HEADER = b"[\n"
FOOTER = b"\n]\n"
_CRC_KEY = b',"crc32":"'
_SUFFIX_LEN = len(_CRC_KEY) + 8 + 2  # ,"crc32":"xxxxxxxx"}
_TERMINATOR = re.compile(rb',"([^"\\]{5})":"([0-9a-f]{8})"\}')  # a damaged key name still ends a record
_RECORD_START = b'{"parts":'
_HEX = frozenset(b"0123456789abcdef")
_DECODER = json.JSONDecoder()


@dataclass
class Record:
    """Where one valid record lies, and what the store needs to know of it without decoding it."""

    offset: int
    length: int
    message_id: str
    summary: dict[str, Any] | None
    crc: int
    """CRC-32 of the record's encoding without its checksum: equal crc, same message content."""
    current: bool = False
    """`crc` is of this process's encoding of the message (not of bytes written by another version)."""


@dataclass
class Damage:
    """A byte range that holds no valid record."""

    start: int
    end: int
    records_lost: int
    """How many records the range seems to have held (0: only framing bytes were damaged)."""
    torn: bool = False
    """The range is at the end of the file with no newline after it (a write that did not finish)."""


@dataclass
class Scan:
    records: list[Record] = field(default_factory=list[Record])
    damage: list[Damage] = field(default_factory=list[Damage])
    clean: bool = True
    """The file is a well-formed JSON array as it is (nothing to repair)."""
    header: bool = True
    """The file starts with our `[` line."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def _escape(value: Any) -> Any:
    """Strings with lone surrogates (e.g. non-UTF-8 file names) made JSON-safe: `\\xff` for a byte that was not
    UTF-8 (how Python shows such a name), `\\udcxx` for any other lone surrogate."""
    if isinstance(value, str):
        return _SURROGATE.sub(_escaped, value)
    if isinstance(value, dict):
        return {k: _escape(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_escape(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def encode(message: ModelMessage) -> tuple[bytes, int]:
    """The record line of `message` (no separator) and its checksum."""
    try:
        raw = ModelMessagesTypeAdapter.dump_json([message])
    except PydanticSerializationError:
        plain = _escape(ModelMessagesTypeAdapter.dump_python([message], mode="json"))
        raw = ModelMessagesTypeAdapter.dump_json(ModelMessagesTypeAdapter.validate_python(plain))
    body = raw[1:-2]  # without the array brackets and the object's closing brace
    crc = zlib.crc32(body)
    return body + b'%s%08x"}' % (_CRC_KEY, crc), crc


def reframed(raw: bytes) -> bytes:
    """A valid record's bytes with its checksum key name restored (a corrupt byte may have hit it)."""
    suffix = raw[-_SUFFIX_LEN:]
    if len(suffix) == _SUFFIX_LEN and _TERMINATOR.fullmatch(suffix) and not suffix.startswith(_CRC_KEY):
        return raw[:-_SUFFIX_LEN] + _CRC_KEY + raw[-10:]
    return raw


def repaired(data: bytes, records: list[Record]) -> bytes:
    """`data` with every byte that is not in a good record blanked (the framing put back, damaged bytes turned
    into spaces, a torn tail cut), so each good record keeps its offset (or, if the records lie too close for
    that, the good records written out one per line)."""
    compact = HEADER + b",\n".join(reframed(data[r.offset : r.offset + r.length]) for r in records)
    if not records:
        return HEADER + FOOTER[1:]
    first = records[0].offset
    if first < len(HEADER):
        return compact + FOOTER
    out = bytearray(b"[" + b" " * (first - len(HEADER)) + b"\n")
    for record, following in zip(records, [*records[1:], None], strict=True):
        out += reframed(data[record.offset : record.offset + record.length])
        if following is not None:
            gap = following.offset - (record.offset + record.length)
            if gap < len(b",\n"):
                return compact + FOOTER
            out += b"," + b" " * (gap - 2) + b"\n"
    return bytes(out + FOOTER)


def record_info(obj: Any) -> tuple[str, dict[str, Any] | None] | None:
    """(message id, summary provenance) of a parsed record, or None if it is not a message record with an id."""
    if not isinstance(obj, dict):
        return None
    record = cast(dict[str, Any], obj)
    metadata: Any = record.get("metadata") or {}
    message_id: Any = cast(dict[str, Any], metadata).get(MESSAGE_ID_KEY) if isinstance(metadata, dict) else None
    parts: Any = record.get("parts")
    if record.get("kind") not in ("request", "response") or not isinstance(message_id, str):
        return None
    if not isinstance(parts, list):
        return None
    summary: dict[str, Any] | None = None
    for part in cast(list[Any], parts):
        if not isinstance(part, dict):
            return None
        part_dict = cast(dict[str, Any], part)
        part_metadata: Any = part_dict.get("metadata")
        if part_dict.get("part_kind") == "compaction" and isinstance(part_metadata, dict):
            info: Any = cast(dict[str, Any], part_metadata).get(SUMMARY_METADATA_KEY)
            summary = clean_summary(cast(dict[str, Any], info)) if isinstance(info, dict) else summary
    return message_id, summary


def clean_summary(info: dict[str, Any]) -> dict[str, Any]:
    """Provenance with the id lists the store follows kept only when they are lists of ids."""
    cleaned = dict(info)
    for key in ("covers", "replaces_summaries", "working_before", "working_after"):
        value = cleaned.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):  # pyright: ignore[reportUnknownVariableType]
            del cleaned[key]
    return cleaned


def _record_at(line: bytes, position: int) -> tuple[int, int, Any, int] | None:
    """(end, crc, parsed object, start of a damaged checksum key or -1) of a valid record starting at
    `position` of `line`, or None."""
    if line.startswith(b"{", position):
        for match in _TERMINATOR.finditer(line, position):
            body = line[position : match.start()]
            crc = zlib.crc32(body)
            if b"%08x" % crc == match.group(2):
                try:
                    obj = json.loads(line[position : match.end()])
                except ValueError:
                    return None
                return match.end(), crc, obj, (-1 if match.group(1) == b"crc32" else match.start(1))
        text = line[position:].decode("utf-8", "surrogateescape")
        try:  # format 1: a record without checksum, accepted when it parses
            obj, length = _DECODER.raw_decode(text, 0)
        except ValueError:
            return None
        end = position + len(text[:length].encode("utf-8", "surrogateescape"))
        if b'"crc32":"' in line[position:end]:
            return None  # a checksummed record whose checksum does not hold
        return end, zlib.crc32(line[position : end - 1]), obj, -1
    return None


def scan_line(line: bytes, base: int) -> Iterator[Record | Damage]:
    """The records and damaged ranges of one line (`base`: its offset in the file)."""
    size = len(line)
    # Fast path: one intact checksummed record, optionally followed by the separator.
    body_end = size - 1 if line.endswith(b",") else size
    suffix = line[body_end - _SUFFIX_LEN : body_end]
    if suffix.startswith(_CRC_KEY) and suffix.endswith(b'"}') and set(suffix[10:18]) <= _HEX:
        crc = zlib.crc32(line[: body_end - _SUFFIX_LEN])
        if b"%08x" % crc == suffix[10:18]:
            try:
                info = record_info(json.loads(line[:body_end]))
            except ValueError:
                info = None
            if info is not None:
                yield Record(base, body_end, info[0], info[1], crc)
                return
    position = 0
    while position < size:
        found = _record_at(line, position)
        info = record_info(found[2]) if found is not None else None
        if found is not None and info is not None:
            end = found[0]
            yield Record(base + position, end - position, info[0], info[1], found[1])
            if found[3] >= 0:  # the record is intact, its checksum's key name is not: repair the framing
                yield Damage(base + found[3], base + found[3] + 5, 0)
            position = end + 1 if line.startswith(b",", end) else end
            continue
        start = position
        position = line.find(_RECORD_START, position + 1)
        while position >= 0:
            candidate = _record_at(line, position)
            if candidate is not None and record_info(candidate[2]) is not None:
                break
            position = line.find(_RECORD_START, position + 1)
        if position < 0:
            position = size
        yield Damage(base + start, base + position, _lost(line[start:position]))


def _lost(raw: bytes) -> int:
    return max(raw.count(b'"crc32":"'), raw.count(_RECORD_START))


def scan(data: bytes, start: int = 0) -> Scan:
    """Every valid record and every damaged range of `data` (the file's bytes from offset `start`)."""
    result = Scan()
    position = 0
    size = len(data)
    if start == 0:
        first_newline = data.find(b"\n")
        if first_newline >= 0 and data[:first_newline].rstrip(b" ") == b"[":
            position = first_newline + 1  # our header line (a repair may have blanked a first record after it)
        else:
            result.header = False
            result.clean = False
    last_line_with_comma = False
    footer = False
    while position < size:
        newline = data.find(b"\n", position)
        complete = newline >= 0
        line_end = newline if complete else size
        line = data[position:line_end].rstrip(b" ")  # a repair blanks damaged bytes with spaces
        if line == b"]" and (line_end == size or line_end + 1 == size):
            footer = True
            break
        if start and position == 0 and line.startswith(b","):
            line, position = line[1:], position + 1
        for item in scan_line(line, start + position):
            if isinstance(item, Record):
                result.records.append(item)
            else:
                result.clean = False
                if not complete and item.end == start + position + len(line):
                    item.torn = True  # a write that did not finish: it held one record if it started one
                    item.records_lost = max(item.records_lost, 1 if b"{" in line else 0)
                previous = result.damage[-1] if result.damage else None
                if previous is not None and item.start - previous.end <= 1:
                    previous.end, previous.torn = item.end, item.torn
                    previous.records_lost = max(previous.records_lost, item.records_lost)
                else:
                    result.damage.append(item)
        if line:
            last_line_with_comma = line.endswith(b",")
        elif start == 0:
            result.clean = False  # an empty line is not ours
        position = line_end + 1
    if start == 0 and (not footer or last_line_with_comma):
        result.clean = False
    return result
