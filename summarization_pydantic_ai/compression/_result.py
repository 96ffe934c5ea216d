"""What every compressor returns, and the first line that marks its output as already compressed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["MARK", "CompressionKind", "CompressionResult", "finish", "is_compressed", "unchanged"]

CompressionKind = Literal["snapshot", "log", "json", "text"]
"""What a compressor treated the content as."""

MARK = "[compressed "
"""The first line of every structural compressor's output starts with this (`[compressed log: ...]`): a
compressor handed its own output returns it as it is, which makes every compressor idempotent."""


@dataclass(frozen=True, slots=True)
class CompressionResult:
    """A compressor's output: the `text`, what it was treated as (`kind`) and its size before and after, in
    characters. `text` is the input itself when nothing was worth removing (`changed` is then false)."""

    text: str
    kind: CompressionKind
    chars_before: int
    chars_after: int

    @property
    def changed(self) -> bool:
        """Whether anything was removed."""
        return self.chars_after != self.chars_before

    @property
    def saved_chars(self) -> int:
        """Characters removed."""
        return self.chars_before - self.chars_after

    @property
    def ratio(self) -> float:
        """Size after / size before (1.0 for empty input)."""
        return self.chars_after / self.chars_before if self.chars_before else 1.0


def is_compressed(content: str) -> bool:
    """Whether `content` is already the output of a structural compressor."""
    return content.startswith(MARK)


def unchanged(content: str, kind: CompressionKind) -> CompressionResult:
    """The result for content left as it is."""
    return CompressionResult(content, kind, len(content), len(content))


def finish(content: str, kind: CompressionKind, body: str, header: Callable[[int], str]) -> CompressionResult:
    """`header(size after) + "\n" + body`, with the size the header states exact (its own digits count), or
    `content` unchanged when that is not smaller."""
    size = len(body) + 1
    line = header(size)
    for _ in range(4):  # the stated size includes the header, whose length depends on the digits: settle it
        stated = header(size + len(line))
        settled = len(stated) == len(line)
        line = stated
        if settled:
            break
    text = line + "\n" + body
    if len(text) >= len(content):
        return unchanged(content, kind)
    return CompressionResult(text, kind, len(content), len(text))
