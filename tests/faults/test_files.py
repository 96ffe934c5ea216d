"""Fault injection: hostile file names against every file tool, through `Agent.run` with the history persisted.

For each name in `HOSTILE_NAMES` (bytes that are not UTF-8, newlines and other control characters, 255-byte names,
names that look like escapes, dots, a leading `-`, Unicode line separators and bidi overrides), a file with that name
is created on disk in a workspace that also holds unrelated files; a scripted model then lists, reads, edits,
greps, globs and writes it by the name it was shown. Checked after every run:

- no exception escapes: every call comes back as a success or as a failed tool call, and the run ends normally;
- every tool result serializes (the middleware persists it to messages.json) and is printable text;
- the tools addressed exactly that file: its bytes changed as edited and nothing else in the workspace did
  (unrelated files byte-identical, including a look-alike literally named like the escaped spelling), `delete`
  removed exactly the file named, and nothing outside the workspace was created, changed or removed.

The same names typed by the model as raw characters (JSON strings) go through a `StateBackend`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.backends import LocalBackend, StateBackend, escape_name, normalize_path
from summarization_pydantic_ai import ContextManagerMiddleware, JsonHistoryStore

pytestmark = pytest.mark.faults

HOSTILE_NAMES: list[bytes] = [
    b"bad\xff.txt",
    b"\xff\xfe",
    b"\xc3(",  # a lead byte without its continuation
    b"\xed\xa0\x80",  # an encoded surrogate (invalid UTF-8)
    b"\xc0\xaf",  # an overlong '/'
    b"new\nline.txt",
    b"\r",
    b"tab\there",
    b"\x1b[2J",
    b"del\x7f",
    b"bell\x07",
    b"\xc2\x85next-line",  # U+0085
    "sep\u2028x".encode(),  # line separator
    "para\u2029x".encode(),  # paragraph separator
    "rtl\u202etxt.exe".encode(),  # right-to-left override: printable, kept as it is
    b"a" * 255,
    b"\xc3\xa9" * 127,  # 254 bytes of valid UTF-8
    b"\xff" * 255,  # 255 undecodable bytes: 1,020 characters escaped
    b"a\\x41",  # looks like an escape
    b"\\xff",
    b"\\\\",
    b"x\\",
    b"\\u00e9",
    b"%2e%2e",
    b"...",
    b"..a",
    b"a..",
    b".. ",
    b"..\xff",
    b"-rf",
    b"--help",
    b"-",
    b" ",
    b"trailing ",
    b".hidden",
]
PAYLOAD = b"payload line\nsecond line\n"
UNRELATED = {b"README.md": b"# unrelated\n", b"src/app.py": b"print('hi')\r\n", b"latin1.txt": b"caf\xe9\n"}


def snapshot(base: Path) -> dict[bytes, bytes | None]:
    """Every file (bytes) and directory (None) under `base`, by its relative path in bytes."""
    found: dict[bytes, bytes | None] = {}
    root = os.fsencode(base)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as file:
                found[os.path.relpath(path, root)] = file.read()
    return found


class Probe:
    """A scripted model that works on one file by the name it is shown, one tool call per turn."""

    def __init__(self, shown: str, copy: str | None = None) -> None:
        copy = shown + ".copy" if copy is None else copy
        self.calls: list[tuple[str, dict[str, Any]]] = [
            ("ls", {"path": "/"}),
            ("read_file", {"path": shown}),
            ("edit_file", {"path": shown, "old_string": "payload line", "new_string": "edited line"}),
            ("grep", {"pattern": "edited", "path": "/"}),
            ("grep", {"pattern": "second", "path": shown}),
            ("glob", {"pattern": "**"}),
            ("write_file", {"path": copy, "content": "copy\n"}),
            ("read_file", {"path": copy}),
            ("write_file", {"path": shown + ".copy", "content": "copy\n"}),  # the same, or a name too long
        ]
        self.received: list[ToolReturnPart] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        self.received.extend(p for p in last.parts if isinstance(p, ToolReturnPart))
        step = len(self.received)
        if step < len(self.calls):
            name, args = self.calls[step]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{step}")])
        return ModelResponse(parts=[TextPart("done")])


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(workspace, messages.json); everything under tmp_path outside the workspace must stay as it was."""
    workspace = tmp_path / "workspace"
    for rel, content in UNRELATED.items():
        path = os.path.join(os.fsencode(workspace), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(content)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "sentinel.txt").write_bytes(b"outside\n")
    before = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith(b"workspace")}
    yield workspace, tmp_path / "history" / "messages.json"
    after = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith((b"workspace", b"history"))}
    assert after == before, "something outside the workspace was created, changed or removed"


def assert_serializable(parts: list[ToolReturnPart]) -> None:
    for part in parts:
        text = json.dumps(part.content, ensure_ascii=False)
        text.encode("utf-8")  # no lone surrogates
        assert "\x00" not in str(part.content)


@pytest.mark.parametrize("raw", HOSTILE_NAMES, ids=[escape_name(n)[:40] for n in HOSTILE_NAMES])
async def test_a_hostile_file_name_on_disk_through_every_tool(world: tuple[Path, Path], raw: bytes) -> None:
    workspace, messages = world
    host = os.path.join(os.fsencode(workspace), raw)
    with open(host, "wb") as file:
        file.write(PAYLOAD)
    look_alike = escape_name(raw).encode()  # a file literally named like the escaped spelling
    if look_alike != raw and len(look_alike) <= 255:
        with open(os.path.join(os.fsencode(workspace), look_alike), "wb") as file:
            file.write(PAYLOAD)
    unrelated = {k: v for k, v in snapshot(workspace).items() if k != raw}
    shown = "/" + escape_name(raw)
    copy = raw[:250] + b".copy"
    probe = Probe(shown, "/" + escape_name(copy))
    agent = create_deep_agent(
        FunctionModel(probe), context_manager=ContextManagerMiddleware(messages_path=messages, max_tokens=200_000)
    )
    result = await agent.run("work on the odd file", deps=DeepAgentDeps(backend=LocalBackend(workspace), base_dir=None))

    assert result.output == "done"
    ls, read, edit, grep_all, grep_one, glob, write, read_copy, too_long = probe.received
    fits = len(raw) + len(b".copy") <= 255
    expected = ["success"] * 8 + ["success" if fits else "failed"]
    assert [p.outcome for p in probe.received] == expected, [(p.tool_name, p.content) for p in probe.received]
    if not fits:
        assert "a path component is longer than 255 bytes" in str(too_long.content)
    assert f"{shown}  ({len(PAYLOAD)} bytes)" in str(ls.content).splitlines()
    assert read.content == "     1\tpayload line\n     2\tsecond line"
    assert edit.content == f"Edited {shown}: replaced 1 occurrence."
    assert grep_all.content == f"{shown}:1: edited line"
    assert grep_one.content == f"{shown}:2: second line"
    assert shown in str(glob.content).splitlines()
    assert write.outcome == "success" and read_copy.content == "     1\tcopy"
    assert_serializable(probe.received)
    with open(host, "rb") as file:
        assert file.read() == PAYLOAD.replace(b"payload line", b"edited line")
    with open(os.path.join(os.fsencode(workspace), copy), "rb") as file:
        assert file.read() == b"copy\n"
    now = {k: v for k, v in snapshot(workspace).items() if k not in (raw, copy, raw + b".copy")}
    assert now == unrelated, "an unrelated file or directory changed"
    await LocalBackend(workspace).delete("/" + escape_name(copy))  # what cleanup_old_archives calls
    assert copy not in snapshot(workspace)
    assert {k: v for k, v in snapshot(workspace).items() if k not in (raw, raw + b".copy")} == unrelated
    store = JsonHistoryStore.reader(messages)
    try:
        stored = store.load_all_sync()
    finally:
        store.close()
    assert sum(isinstance(p, ToolReturnPart) for m in stored for p in m.parts) == 9


@pytest.mark.parametrize("raw", HOSTILE_NAMES, ids=[escape_name(n)[:40] for n in HOSTILE_NAMES])
async def test_a_hostile_name_typed_by_the_model_in_memory(raw: bytes) -> None:
    """The model types the raw characters (what JSON can carry); the backend stores and shows the canonical name."""
    typed = "/" + raw.decode("utf-8", "surrogateescape")
    if b"\\" in raw or any("\udc80" <= c <= "\udcff" for c in typed):
        typed = "/" + escape_name(raw)  # a backslash starts an escape; JSON cannot carry undecodable bytes
    shown = normalize_path(typed)
    assert shown == "/" + escape_name(raw)
    fs = StateBackend({"/README.md": "# unrelated\n"})
    await fs.write(typed, PAYLOAD.decode())
    copy = "/" + escape_name(raw[:250] + b".copy")
    probe = Probe(shown, copy)
    agent = create_deep_agent(FunctionModel(probe), context_manager=False)
    result = await agent.run("work on the odd file", deps=DeepAgentDeps(backend=fs, base_dir=None))
    assert result.output == "done"
    fits = len(raw) + len(b".copy") <= 255
    expected = ["success"] * 8 + ["success" if fits else "failed"]
    assert [p.outcome for p in probe.received] == expected, [(p.tool_name, p.content) for p in probe.received]
    assert_serializable(probe.received)
    assert await fs.read(typed) == "edited line\nsecond line\n"
    assert await fs.read("/README.md") == "# unrelated\n"
    assert sorted(await fs.glob("**")) == sorted({"/README.md", shown, copy, *([shown + ".copy"] if fits else [])})


HOSTILE_PATHS = [
    "\\x2e\\x2e/outside/sentinel.txt",  # an escaped '..': decoded before '..' is interpreted, still refused
    "a/\\x2e\\x2e/\\x2e\\x2e/outside/sentinel.txt",
    "\\x2f..\\x2foutside",  # an escaped '/'
    "x\\x00y",  # an escaped NUL
    "\\x",
    "\\xZZ",
    "..\\..\\outside",
    "\\\\..\\\\..",  # backslash names, not separators: stay inside
    "-rf /",
    "/" + "\\xff" * 256,  # 256 bytes once decoded
]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
async def test_hostile_typed_paths_fail_cleanly_or_stay_inside(world: tuple[Path, Path], path: str) -> None:
    workspace, messages = world
    before = snapshot(workspace)
    calls = [
        ("read_file", {"path": path}),
        ("edit_file", {"path": path, "old_string": "outside", "new_string": "PWNED"}),
        ("ls", {"path": path}),
        ("grep", {"pattern": ".", "path": path}),
        ("glob", {"pattern": "*", "path": path}),
        ("write_file", {"path": path, "content": "PWNED"}),
    ]
    probe = Probe("/unused")
    probe.calls = calls
    agent = create_deep_agent(
        FunctionModel(probe), context_manager=ContextManagerMiddleware(messages_path=messages, max_tokens=200_000)
    )
    result = await agent.run("probe", deps=DeepAgentDeps(backend=LocalBackend(workspace), base_dir=None))
    assert result.output == "done"
    assert len(probe.received) == len(calls)
    assert_serializable(probe.received)
    for part in probe.received:
        assert "outside\n" not in str(part.content) and "pytest-of-" not in str(part.content)
    write = probe.received[-1]
    after = snapshot(workspace)
    if write.outcome == "success":  # a name inside the workspace: only that file was created
        created = set(after) - set(before)
        assert all(after[k] in (b"PWNED", None) for k in created) and created
        assert {k: v for k, v in after.items() if k not in created} == before
    else:
        assert after == before
