"""Properties of the escaped file-name spelling and of paged reads, for any input."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pydantic_deep.backends import (
    BackendError,
    BackendProtocol,
    CompositeBackend,
    FileInfo,
    GrepMatch,
    GrepStopped,
    LocalBackend,
    PathEscapeError,
    StateBackend,
    compile_grep_pattern,
    escape_name,
    grep_lines,
    normalize_path,
    text_page,
    unescape_name,
)
from pydantic_deep.filesystem import number_lines

names = st.binary(min_size=1, max_size=40).filter(lambda b: b"/" not in b and b"\x00" not in b)


@given(names)
def test_every_name_has_one_printable_spelling_that_decodes_back(raw: bytes) -> None:
    shown = escape_name(raw)
    assert unescape_name(shown) == raw
    json.dumps(shown, ensure_ascii=False).encode("utf-8")  # no surrogates: it serializes
    assert all(unicodedata.category(c) not in ("Cc", "Zl", "Zp", "Cs") for c in shown)
    assert escape_name(os.fsdecode(raw)) == shown  # the same spelling from what os.listdir(str) returns
    if raw not in (b".", b".."):
        assert normalize_path(shown) == "/" + shown == normalize_path(normalize_path(shown))


@given(st.text(max_size=30))
def test_normalize_path_is_canonical_or_refuses(path: str) -> None:
    try:
        once = normalize_path(path)
    except PathEscapeError:
        return
    assert normalize_path(once) == once
    json.dumps(once, ensure_ascii=False).encode("utf-8")


def reference_page(text: str, offset: int, limit: int) -> list[str]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return [] if text == "" else lines[offset : offset + limit]


texts = st.lists(st.sampled_from(["a", "é", "\r", "\n", "€", "x" * 7, "\U0001f600"]), max_size=40).map("".join)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=150)
@given(text=texts, offset=st.integers(0, 12), limit=st.integers(1, 12), width=st.integers(1, 9))
def test_a_streamed_page_is_the_page_of_the_whole_text(
    tmp_path: Path, text: str, offset: int, limit: int, width: int
) -> None:
    page = text_page(text, offset, limit, max_line_chars=width, max_chars=10_000)
    expected = reference_page(text, offset, limit)
    assert page.lines == [line[:width] for line in expected]
    assert page.cut == [max(len(line) - width, 0) for line in expected]
    total = len(reference_page(text, 0, 10**9))
    assert page.total_lines == total
    assert not page.undecodable


async def test_local_state_and_composite_pages_agree(tmp_path: Path) -> None:
    text = "one\r\ntwo\n" + "é" * 50 + "\nlast"
    (tmp_path / "f.txt").write_text(text, newline="")
    backends: list[Any] = [
        LocalBackend(tmp_path),
        StateBackend({"/f.txt": text}),
        CompositeBackend(StateBackend(), routes={"/f.txt": LocalBackend(tmp_path)}),
    ]
    pages = [await b.read_page("/f.txt", 1, 2, max_line_chars=10, max_chars=1_000) for b in backends]
    assert pages[0] == pages[1] == pages[2]
    assert pages[0].lines == ["two", "é" * 10] and pages[0].cut == [0, 40] and pages[0].total_lines == 4


class ReadOnlyText:
    """A minimal backend without `read_page`: the file tools and `CompositeBackend` fall back to `read`."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def read(self, path: str) -> str:
        return self.text

    async def write(self, path: str, content: str) -> None:
        raise BackendError("read only")

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        raise BackendError("read only")

    async def ls(self, path: str = "/") -> list[FileInfo]:
        return []

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        return []

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        ignore_case: bool = False,
        max_results: int = 200,
    ) -> list[GrepMatch]:
        raise GrepStopped("stopped for the test", [GrepMatch("/ro/a.txt", 1, "hit")])

    async def delete(self, path: str) -> None:
        raise BackendError("read only")

    async def exists(self, path: str) -> bool:
        return True

    async def stat(self, path: str) -> FileInfo:
        return FileInfo(path, False, len(self.text), 0.0)


async def test_composite_falls_back_to_read_and_keeps_partial_grep_results() -> None:
    plain: BackendProtocol = ReadOnlyText("a\nb\nc\n")
    fs = CompositeBackend(StateBackend({"/x.txt": "hit here\n"}), routes={"/ro": plain})
    page = await fs.read_page("/ro/a.txt", 1, 1, max_line_chars=100, max_chars=100)
    assert page.lines == ["b"] and page.total_lines == 3
    with pytest.raises(GrepStopped) as stopped:
        await fs.grep("hit")
    assert [m.path for m in stopped.value.matches] == ["/ro/a.txt", "/x.txt"]
    assert str(stopped.value) == "stopped for the test"


def test_number_lines_keeps_carriage_returns() -> None:
    assert number_lines("a\r\nb\r\n", "/f") == "     1\ta\r\n     2\tb\r"


@given(
    text=st.lists(st.sampled_from(["ab", "a", "b", "\n", "\r\n", " ", "é"]), max_size=30).map("".join),
    pattern=st.sampled_from(["a", "ab", "b a", "é", "x"]),
    limit=st.integers(1, 5),
)
def test_plain_text_patterns_match_like_the_regular_expression(text: str, pattern: str, limit: int) -> None:
    """A literal pattern takes a `str.find` fast path; it must find exactly what the per-line search finds."""
    fast = list(grep_lines(compile_grep_pattern(pattern), "/f", text, limit))
    slow = list(grep_lines(compile_grep_pattern(f"(?:{pattern})"), "/f", text, limit))  # not a literal: regex path
    assert fast == slow
