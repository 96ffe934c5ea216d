"""Hostile paths against `LocalBackend` and the file tools: zero reads or writes outside the root.

Every case builds a root with symlinks leading out (to a sentinel file, to a directory holding it, to an /etc
look-alike, through a chain, dangling) and checks, after the operation, that nothing outside the root was modified
or created, and that no returned value contains the sentinel's text or the fake passwd's.

Every target outside the root lives under pytest's tmp_path, never on the host's real paths: a regression in the
confinement (or a deliberately broken build used to check that these tests catch one) must not be able to write to
or delete the machine's /etc.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep.backends import BackendError, LocalBackend, PathEscapeError, normalize_path, unescape_name
from pydantic_deep.filesystem import FilesystemToolset, HygieneToolset

SECRET = "SENTINEL-SECRET-TEXT"
PASSWD_MARK = "root:x:0:0"

ESCAPE = "escape"  # every operation must raise PathEscapeError
INSIDE = "inside"  # an ordinary virtual path: it must resolve inside the root (success, or not found / is a dir)
LOOP = "loop"  # a symlink loop inside the root: refused or not found, never outside

HOSTILE: list[tuple[str, str]] = [
    ("../", ESCAPE),
    ("..", ESCAPE),
    ("/..", ESCAPE),
    ("../../etc/passwd", ESCAPE),
    ("a/../../b", ESCAPE),
    ("./../x", ESCAPE),
    ("/a/b/../../../x", ESCAPE),
    ("sub/../../outside/sentinel.txt", ESCAPE),
    ("x\x00y", ESCAPE),
    ("inside.txt\x00.png", ESCAPE),
    ("a" * 4096, ESCAPE),
    ("a" * 300, ESCAPE),
    ("é" * 128, ESCAPE),  # 256 bytes in UTF-8
    ("/" + "ab/" * 1400, ESCAPE),  # more than 4,096 bytes in all
    ("..\\..\\x", ESCAPE),
    ("C:\\Windows", ESCAPE),
    ("\\\\server\\share", ESCAPE),
    ("sub\\..\\..\\outside", ESCAPE),
    ("\\x2e\\x2e/outside/sentinel.txt", ESCAPE),  # an escaped '..' is '..'
    ("sub/\\x2e\\x2e/\\x2e\\x2e/outside", ESCAPE),
    ("\\x2f..\\x2foutside", ESCAPE),  # an escaped '/' is refused
    ("x\\x00y", ESCAPE),  # an escaped NUL
    ("\\xff" * 256, ESCAPE),  # 256 bytes once decoded
    ("\\\\..", INSIDE),  # a name holding a backslash: a file inside the root
    ("link_out\\x2fsentinel.txt", ESCAPE),
    ("link_out", ESCAPE),
    ("link_out/sentinel.txt", ESCAPE),
    ("link_out/dir/inner.txt", ESCAPE),
    ("/link_out/../link_out/sentinel.txt", ESCAPE),
    ("link_file_out", ESCAPE),
    ("chain1", ESCAPE),
    ("link_etc", ESCAPE),
    ("link_etc/passwd", ESCAPE),
    ("dangling_out", ESCAPE),
    ("link_parent/outside/sentinel.txt", ESCAPE),
    ("/etc/passwd", INSIDE),
    ("etc/passwd", INSIDE),
    ("/proc/self/root/etc/passwd", INSIDE),
    ("//server/share", INSIDE),
    ("C:/Windows/win.ini", INSIDE),
    ("%2e%2e/%2e%2e/etc/passwd", INSIDE),
    ("..%2f..%2fetc%2fpasswd", INSIDE),
    ("\u2025/x", INSIDE),  # two dot leader
    ("\uff0e\uff0e/x", INSIDE),  # fullwidth full stops
    ("\uff0fetc\uff0fpasswd", INSIDE),  # fullwidth solidus
    ("\u202e../x", INSIDE),  # right-to-left override before the dots
    ("...", INSIDE),
    (" ../x", INSIDE),
    ("~/x", INSIDE),
    ("$HOME/.bashrc", INSIDE),
    ("/.", INSIDE),
    ("sub/.", INSIDE),
    ("sub/./file.txt", INSIDE),
    ("link_in/file.txt", INSIDE),
    ("link_in_file", INSIDE),
    ("loop", LOOP),
]


@dataclass
class World:
    root: Path
    outside: Path
    sentinel: Path
    backend: LocalBackend

    def snapshot(self) -> dict[str, tuple[str, bytes, int]]:
        """Everything under tmp_path except the root: type, content (files) or target (links), mtime."""
        base = self.root.parent
        found: dict[str, tuple[str, bytes, int]] = {}
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            if Path(dirpath) == self.root:
                dirnames.clear()
                continue
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                if path == self.root:
                    continue
                st = path.lstat()
                if path.is_symlink():
                    found[str(path)] = ("link", os.readlink(path).encode(), st.st_mtime_ns)
                elif path.is_dir():
                    found[str(path)] = ("dir", b"", st.st_mtime_ns)
                else:
                    found[str(path)] = ("file", path.read_bytes(), st.st_mtime_ns)
        return found


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    sentinel = outside / "sentinel.txt"
    sentinel.write_text(f"{SECRET}\n")
    (outside / "dir" / "inner.txt").write_text(f"{SECRET} inner\n")
    fake_etc = outside / "etc"  # stands in for /etc: hostile paths aim at it through a symlink
    fake_etc.mkdir()
    (fake_etc / "passwd").write_text(f"{PASSWD_MARK}:root:/root:/bin/bash\n")
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "inside.txt").write_text("inside\n")
    (root / "sub" / "file.txt").write_text("sub file\n")
    links = {
        "link_out": outside,
        "link_file_out": sentinel,
        "link_etc": fake_etc,
        "chain1": root / "chain2",
        "chain2": sentinel,
        "dangling_out": outside / "would_be_created",
        "link_parent": Path(".."),
        "link_in": Path("sub"),
        "link_in_file": Path("inside.txt"),
        "loop": Path("loop"),
    }
    for name, target in links.items():
        (root / name).symlink_to(target)
    w = World(root, outside, sentinel, LocalBackend(root))
    before = w.snapshot()
    yield w
    assert w.snapshot() == before, "something outside the root was created, modified or deleted"
    assert sentinel.read_text() == f"{SECRET}\n"


def assert_clean(value: Any) -> None:
    text = repr(value)
    assert SECRET not in text, f"outside content leaked: {text[:200]}"
    assert PASSWD_MARK not in text, f"/etc/passwd leaked: {text[:200]}"
    assert "pytest-of-" not in text, f"a host path leaked: {text[:200]}"


def host(world: World, vpath: str) -> Path:
    """The file a canonical virtual path names on disk (escaped names decoded)."""
    return world.root.joinpath(*(os.fsdecode(unescape_name(name)) for name in vpath.split("/") if name))


def assert_inside(world: World, vpath: str) -> None:
    real = os.path.realpath(host(world, vpath))
    root = os.path.realpath(world.root)
    assert real == root or real.startswith(root + os.sep), f"{vpath} resolved to {real}"


async def run_op(world: World, op: str, path: str) -> Any:
    fs = world.backend
    if op == "read":
        return await fs.read(path)
    if op == "write":
        return await fs.write(path, "written by the test")
    if op == "edit":
        return await fs.edit(path, "inside", "edited")
    if op == "ls":
        return await fs.ls(path)
    if op == "glob":
        return await fs.glob("**", path)
    if op == "grep":
        return await fs.grep(".", path)
    if op == "delete":
        return await fs.delete(path)
    if op == "exists":
        return await fs.exists(path)
    assert op == "stat"
    return await fs.stat(path)


OPS = ["read", "write", "edit", "ls", "glob", "grep", "delete", "exists", "stat"]
ALLOWED_INSIDE = (FileNotFoundError, IsADirectoryError, NotADirectoryError, BackendError)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(("path", "kind"), [pytest.param(p, k, id=f"{k}:{p[:40]!r}") for p, k in HOSTILE])
async def test_backend_operation_stays_inside(world: World, op: str, path: str, kind: str) -> None:
    if kind == ESCAPE:
        with pytest.raises(PathEscapeError) as info:
            await run_op(world, op, path)
        assert isinstance(info.value, PermissionError)
        assert_clean(str(info.value))
        return
    try:
        result = await run_op(world, op, path)
    except ALLOWED_INSIDE as exc:
        assert_clean(str(exc))
        return
    except PathEscapeError:
        assert kind == LOOP, f"{path!r} is an ordinary path inside the root and must not be refused"
        return
    assert_clean(result)
    if op == "write":
        vpath = normalize_path(path)
        assert_inside(world, vpath)
        assert host(world, vpath).read_text() == "written by the test"


@pytest.mark.parametrize("path", [p for p, k in HOSTILE])
async def test_hostile_glob_patterns_and_grep_filters_find_nothing_outside(world: World, path: str) -> None:
    for found in (await world.backend.glob(path), await world.backend.glob(path, "/sub")):
        assert_clean(found)
        for vpath in found:
            assert_inside(world, vpath)
    matches = await world.backend.grep(".", "/", glob=path)
    assert_clean(matches)


async def test_listing_and_searching_the_root_never_show_outside_entries(world: World) -> None:
    names = [e.path for e in await world.backend.ls("/")]
    assert names == ["/inside.txt", "/link_in", "/link_in_file", "/sub"]  # links leading out (or looping) are hidden
    everything = await world.backend.glob("**")
    assert everything == ["/inside.txt", "/link_in_file", "/sub/file.txt"]  # directory links are not entered
    assert_clean(await world.backend.grep("", "/"))


async def test_writing_through_links_that_stay_inside_works(world: World) -> None:
    await world.backend.write("/link_in/new.txt", "via a directory link")
    assert (world.root / "sub" / "new.txt").read_text() == "via a directory link"
    await world.backend.write("/link_in_file", "via a file link")
    assert (world.root / "inside.txt").read_text() == "via a file link"
    await world.backend.delete("/link_in_file")  # removes the link, never its target
    assert (world.root / "inside.txt").exists()
    assert not (world.root / "link_in_file").is_symlink()


async def test_etc_passwd_is_a_virtual_path_inside_the_root(world: World) -> None:
    with pytest.raises(FileNotFoundError):
        await world.backend.read("/etc/passwd")
    await world.backend.write("/etc/passwd", "a file of the workspace")
    assert (world.root / "etc" / "passwd").read_text() == "a file of the workspace"
    assert await world.backend.read("etc/passwd") == "a file of the workspace"


def test_a_root_given_through_a_symlink_is_resolved(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    assert LocalBackend(tmp_path / "alias").root == (tmp_path / "real").resolve()


# -- through the file tools -----------------------------------------------------------------------------------------


def tool_calls(path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "PWNED"}),
        ("edit_file", {"path": path, "old_string": SECRET, "new_string": "PWNED"}),
        ("ls", {"path": path}),
        ("glob", {"pattern": "**", "path": path}),
        ("grep", {"pattern": ".", "path": path}),
        ("cleanup_old_archives", {"prefix": path, "keep_last_n": 0}),
        ("glob", {"pattern": path}),
        ("grep", {"pattern": ".", "glob": path}),
        ("organize_virtual_fs", {}),
    ]


PATH_TOOLS = 7  # the first calls take `path` as a path; the rest use it as a pattern (or not at all)


def scripted(calls: list[tuple[str, dict[str, Any]]]) -> tuple[FunctionModel, list[ToolReturnPart]]:
    returns: list[ToolReturnPart] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=f"call{i}") for i, (name, args) in enumerate(calls)]
            )
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        returns.extend(p for p in last.parts if isinstance(p, ToolReturnPart))
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model), returns


@pytest.mark.parametrize(("path", "kind"), [pytest.param(p, k, id=f"{k}:{p[:40]!r}") for p, k in HOSTILE])
async def test_file_tools_stay_inside(world: World, path: str, kind: str) -> None:
    model, returns = scripted(tool_calls(path))
    agent = Agent(model, toolsets=[FilesystemToolset(backend=world.backend), HygieneToolset(backend=world.backend)])
    with agent.parallel_tool_call_execution_mode("sequential"):
        result = await agent.run("probe the file system")
    assert result.output == "done"  # no crash: every failure went back to the model
    assert [r.tool_call_id for r in returns] == [f"call{i}" for i in range(len(tool_calls(path)))]
    for part in returns:
        assert_clean(part.content)
    if kind == ESCAPE:
        for part in returns[:PATH_TOOLS]:
            assert part.outcome == "failed", (part.tool_name, part.content)
            assert "Access denied" in str(part.content)
    else:
        for part in returns[:PATH_TOOLS]:
            assert "Access denied" not in str(part.content) or kind == LOOP, (part.tool_name, part.content)
        if kind == INSIDE and returns[1].outcome != "failed":
            assert_inside(world, normalize_path(path))
