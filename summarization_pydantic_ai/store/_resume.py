"""The resume point of a `messages.json`: where its working context lies, kept beside it so that `load()` reads
only the latest summary, what it kept, and what followed (not the records before it).

`messages.json.resume` (two lines: a JSON object and its CRC-32) holds

- `start`: the offset of the latest summary's first record (`null`: no summary, every message is working);
- `head`: the working records up to that summary (slot key, offset, length, message id), latest versions;
- `versions`: each newer version recorded after `start` (offset, slot key), so a record is known to be a new
  message or another version of an earlier one without knowing the ids before `start`;
- `end` and `tail`: where the footer starts and a digest of the bytes before it, when the point was written.

Every message first recorded after `start` is working (the working context's tail), in recorded order, at its
latest version. The writer rewrites the point after each append (in place, a few hundred bytes). A point that does
not describe the file as it is now (a crash between the two writes, an append by another program, a repair) is
not used: `load()` then reads the whole file once, exactly as without a point. A slot key is the offset of a
message's first record: it names the message's place without its id.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pydantic_ai.messages import ModelMessage

from .._messages import get_message_id
from ._checked import COMPACTION as _COMPACTION
from ._checked import Line, checked_lines, decode_lines, summary_of
from ._framing import FOOTER, HEADER, Record
from ._json_index import FileIndex
from ._working import working_head

__all__ = ["ResumePoint", "advance", "load_from_point", "point_path", "read_point", "resume_point_of", "write_point"]

_TAIL = 256
_VERSION = 1


def point_path(history: Path) -> Path:
    return history.with_name(history.name + ".resume")


def tail_digest(data: bytes | bytearray) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass
class ResumePoint:
    start: int | None
    head: list[tuple[int, int, int, str]] = field(default_factory=list[tuple[int, int, int, str]])
    versions: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    end: int = len(HEADER)
    tail: str = ""

    def encode(self) -> bytes:
        body = json.dumps(
            {
                "v": _VERSION,
                "start": self.start,
                "head": self.head,
                "versions": self.versions,
                "end": self.end,
                "tail": self.tail,
            },
            separators=(",", ":"),
        ).encode()
        return body + b"\n%08x\n" % zlib.crc32(body)

    @classmethod
    def decode(cls, data: bytes) -> ResumePoint | None:
        body, _, rest = data.partition(b"\n")
        if rest.strip() != b"%08x" % zlib.crc32(body):
            return None  # torn (a write in progress) or damaged
        try:
            obj = cast(dict[str, Any], json.loads(body))
            if obj.get("v") != _VERSION:
                return None
            head = [(int(k), int(o), int(n), str(i)) for k, o, n, i in obj["head"]]
            versions = [(int(o), int(k)) for o, k in obj["versions"]]
            start = None if obj["start"] is None else int(obj["start"])
            return cls(start, head, versions, int(obj["end"]), str(obj["tail"]))
        except (ValueError, TypeError, KeyError):
            return None


def resume_point_of(index: FileIndex) -> ResumePoint:
    """The point of a fully indexed file (the writer's index); `end`/`tail` are set by `write_point`."""
    latest, head = working_head(index.slots, index.positions)
    start = index.firsts[latest] if latest is not None else None
    entries = [(index.firsts[index.positions[r.message_id]], r.offset, r.length, r.message_id) for r in head]
    versions = [(offset, key) for offset, key in index.versions if start is None or offset > start]
    return ResumePoint(start, entries, versions, index.end)


def advance(point: ResumePoint | None, index: FileIndex, added: list[tuple[Record, Record | None]]) -> ResumePoint:
    """The point after an append of `added` (each record with the version it replaced, `None` for a new message):
    extended in O(new records), or computed again when a summary was recorded or replaced."""
    if point is None or any(r.summary or (old is not None and old.summary) for r, old in added):
        return resume_point_of(index)
    for record, old in added:
        if old is not None:
            point.versions.append((record.offset, index.firsts[index.positions[record.message_id]]))
    point.end = index.end
    return point


def write_point(history: Path, point: ResumePoint, handle_fd: int) -> None:
    """Record `point` beside `history` (whose open descriptor is `handle_fd`, read for the tail digest). Best
    effort: a point that cannot be written is only a slower next `load()`."""
    start = max(0, point.end - _TAIL)
    try:
        point.tail = tail_digest(os.pread(handle_fd, point.end - start, start))
        fd = os.open(point_path(history), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            data = point.encode()
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
    except OSError:
        point_path(history).unlink(missing_ok=True)


def read_point(history: Path) -> ResumePoint | None:
    try:
        return ResumePoint.decode(point_path(history).read_bytes())
    except OSError:
        return None


def load_from_point(history: Path, point: ResumePoint) -> list[ModelMessage] | None:
    """The working context read through `point`: the bytes from its summary on and its head records, each
    checked, decoded in one call. `None` when the point does not describe the file as it is (read it whole)."""
    try:
        with history.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size != point.end + len(FOOTER):
                return None
            window = point.start if point.start is not None else len(HEADER)
            # From the byte before the window (a newline, made the array's `[`): with the footer at the end, the
            # bytes read are the window's records as a JSON array, decoded without a copy.
            base = max(0, min(window - 1, point.end - _TAIL))
            data = bytearray(size - base)
            if os.preadv(handle.fileno(), [data], base) != len(data):
                return None
            tail = data[max(0, point.end - _TAIL) - base : point.end - base]
            if not data.endswith(FOOTER) or tail_digest(tail) != point.tail:
                return None
            lines = checked_lines(data, window - base, point.end - base, base=base)
            if lines is None:
                return None
            if base == window - 1:
                data[0] = ord("[")
            working = _working_lines(point, lines, window)
            raws, working = _gather(handle.fileno(), data, base, window, working)
    except OSError:
        return None
    if working is None:
        return None
    try:
        messages = decode_lines(raws, working, base=base if raws is data else 0)
    except ValueError:
        return None
    head_ids = [entry[3] for entry in point.head]
    if [get_message_id(m) for m in messages[: len(head_ids)]] != head_ids:
        return None
    after_summary = window - base + (lines[0][1] if point.start is not None else 0)  # the summary's first record
    if data.find(_COMPACTION, after_summary) >= 0 and any(summary_of(m) for m in messages[len(head_ids) :]):
        return None  # a summary the point does not know of
    return messages


def _working_lines(point: ResumePoint, lines: list[Line], window: int) -> list[Line] | None:
    """The working records: the head at its latest versions, then every message first recorded in the window
    at its latest version (`lines`: the window's records)."""
    head: dict[int, Line] = {key: (offset, length, -1) for key, offset, length, _ in point.head}
    versions = dict(point.versions)
    tail: dict[int, Line] = {}
    for line in lines:
        offset = line[0]
        key = versions.get(offset, offset)
        if key in head:
            if offset >= head[key][0]:
                head[key] = line
        elif key == offset or key in tail:
            tail[key] = line
        # else: a newer version of a message recorded before the summary that is not working
    if any(offset >= window and crc < 0 for offset, _, crc in head.values()):
        return None  # the point names a record the window does not hold
    return [head[key] for key, _, _, _ in point.head] + list(tail.values())


def _gather(
    fd: int, data: bytearray, base: int, window: int, working: list[Line] | None
) -> tuple[bytes | bytearray, list[Line] | None]:
    """The working records as one buffer and their lines in it: `data` itself when the checked window holds
    them all, else with the records before the window read, checked, and everything joined."""
    if working is None or all(offset >= window for offset, _, _ in working):
        return data, working
    pieces: list[bytes | bytearray] = []
    lines: list[Line] = []
    position = 0
    for offset, length, crc in working:
        raw = data[offset - base : offset - base + length] if offset >= base else os.pread(fd, length, offset)
        if len(raw) != length or (offset < window and checked_lines(raw, 0, length) is None):
            return b"", None
        lines.append((position, length, crc))
        pieces.append(raw)
        position += length + 2
    return b",\n".join(pieces), lines
