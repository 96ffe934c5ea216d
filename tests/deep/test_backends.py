"""The three backends behave the same on one behaviour table; StateBackend serialization; CompositeBackend routing."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pydantic_deep.backends import (
    BackendError,
    BackendProtocol,
    CompositeBackend,
    EditError,
    FileInfo,
    GrepMatch,
    LocalBackend,
    StateBackend,
    match_glob,
)

FILES = {
    "a.txt": "alpha\nbeta\nalpha\n",
    "src/main.py": "import os\n\ndef main():\n    return 1\n",
    "src/pkg/util.py": "def helper():\n    return 'x'\n",
    "src/pkg/data.bin": "PNG\x00\x01 binary alpha",
    "docs/readme.md": "# Alpha\nSee ALPHA.\n",
    "unicode/ünï.txt": "naïve café ☕\n",
}

# (backend kind, base directory the table runs in): composites (route "/r/") run it in the default backend ("/d")
# and in the route.
SETUPS = [
    ("local", "/"),
    ("state", "/"),
    ("composite", "/d"),
    ("composite", "/r"),
    ("composite-reversed", "/d"),
    ("composite-reversed", "/r"),
]


def make_backend(kind: str, tmp_path: Path) -> BackendProtocol:
    if kind == "local":
        return LocalBackend(tmp_path / "root")
    if kind == "state":
        return StateBackend()
    if kind == "composite":
        return CompositeBackend(StateBackend(), routes={"/r/": LocalBackend(tmp_path / "routed")})
    assert kind == "composite-reversed"
    return CompositeBackend(LocalBackend(tmp_path / "root"), routes={"/r/": StateBackend()})


class P:
    """Paths of the table, relative to the base directory."""

    def __init__(self, base: str) -> None:
        self.base = base

    def __call__(self, rel: str = "") -> str:
        return (self.base.rstrip("/") + "/" + rel).rstrip("/") or "/"


@pytest.fixture(params=SETUPS, ids=[f"{k}:{b}" for k, b in SETUPS])
async def seeded(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[BackendProtocol, P]:
    kind, base = request.param
    fs, p = make_backend(kind, tmp_path), P(base)
    for rel, content in FILES.items():
        await fs.write(p(rel), content)
    return fs, p


Op = Callable[[BackendProtocol, P], Awaitable[Any]]


def entries(infos: list[FileInfo]) -> list[tuple[str, bool]]:
    return [(i.path, i.is_dir) for i in infos]


def hits(matches: list[GrepMatch]) -> list[tuple[str, int]]:
    return [(m.path, m.line_number) for m in matches]


# id, operation, expected: a value, a function of P giving the value, or an exception class.
TABLE: list[tuple[str, Op, Any]] = [
    ("read", lambda fs, p: fs.read(p("a.txt")), FILES["a.txt"]),
    ("read dotted", lambda fs, p: fs.read(p("src/./pkg/../../a.txt")), FILES["a.txt"]),
    ("read relative form", lambda fs, p: fs.read(p("a.txt").lstrip("/")), FILES["a.txt"]),
    ("read unicode", lambda fs, p: fs.read(p("unicode/ünï.txt")), FILES["unicode/ünï.txt"]),
    ("read missing", lambda fs, p: fs.read(p("nope.txt")), FileNotFoundError),
    ("read directory", lambda fs, p: fs.read(p("src")), IsADirectoryError),
    ("read base directory", lambda fs, p: fs.read(p()), IsADirectoryError),
    ("read under a file", lambda fs, p: fs.read(p("a.txt/x")), (FileNotFoundError, NotADirectoryError)),
    (
        "ls base",
        lambda fs, p: _ls(fs, p()),
        lambda p: [(p("a.txt"), False), (p("docs"), True), (p("src"), True), (p("unicode"), True)],
    ),
    ("ls subdir", lambda fs, p: _ls(fs, p("src")), lambda p: [(p("src/main.py"), False), (p("src/pkg"), True)]),
    ("ls missing", lambda fs, p: fs.ls(p("nope")), FileNotFoundError),
    ("ls a file", lambda fs, p: fs.ls(p("a.txt")), NotADirectoryError),
    ("stat file", lambda fs, p: _stat(fs, p("unicode/ünï.txt")), lambda p: (p("unicode/ünï.txt"), False, 17)),
    ("stat dir", lambda fs, p: _stat(fs, p("src/pkg")), lambda p: (p("src/pkg"), True, 0)),
    ("stat missing", lambda fs, p: fs.stat(p("nope")), FileNotFoundError),
    ("exists file", lambda fs, p: fs.exists(p("a.txt")), True),
    ("exists dir", lambda fs, p: fs.exists(p("src/pkg")), True),
    ("exists missing", lambda fs, p: fs.exists(p("src/nope.py")), False),
    ("glob **", lambda fs, p: fs.glob("**/*.py", p()), lambda p: [p("src/main.py"), p("src/pkg/util.py")]),
    ("glob * one level", lambda fs, p: fs.glob("*.txt", p()), lambda p: [p("a.txt")]),
    ("glob subdir pattern", lambda fs, p: fs.glob("src/*.py", p()), lambda p: [p("src/main.py")]),
    ("glob from a subdir", lambda fs, p: fs.glob("*.py", p("src")), lambda p: [p("src/main.py")]),
    (
        "glob absolute",
        lambda fs, p: fs.glob(p("src/**/*.py"), p("src")),
        lambda p: [p("src/main.py"), p("src/pkg/util.py")],
    ),
    ("glob ?", lambda fs, p: fs.glob("?.txt", p()), lambda p: [p("a.txt")]),
    ("glob class", lambda fs, p: fs.glob("[ab].*", p()), lambda p: [p("a.txt")]),
    ("glob everything", lambda fs, p: fs.glob("**", p()), lambda p: sorted(p(r) for r in FILES)),
    ("glob dotdot finds nothing", lambda fs, p: fs.glob("../*", p("src")), []),
    ("glob no match", lambda fs, p: fs.glob("*.rs", p()), []),
    ("glob missing dir", lambda fs, p: fs.glob("*", p("nope")), FileNotFoundError),
    ("grep", lambda fs, p: _grep(fs, "alpha", p()), lambda p: [(p("a.txt"), 1), (p("a.txt"), 3)]),
    (
        "grep ignore_case",
        lambda fs, p: _grep(fs, "alpha", p(), ignore_case=True),
        lambda p: [(p("a.txt"), 1), (p("a.txt"), 3), (p("docs/readme.md"), 1), (p("docs/readme.md"), 2)],
    ),
    (
        "grep glob by name",
        lambda fs, p: _grep(fs, r"def \w+", p(), glob="*.py"),
        lambda p: [(p("src/main.py"), 3), (p("src/pkg/util.py"), 1)],
    ),
    (
        "grep glob with dirs",
        lambda fs, p: _grep(fs, ".", p(), glob="src/pkg/*"),
        lambda p: [(p("src/pkg/util.py"), 1), (p("src/pkg/util.py"), 2)],
    ),
    ("grep skips binary", lambda fs, p: _grep(fs, "binary", p()), []),
    ("grep max_results", lambda fs, p: _grep(fs, "alpha", p(), max_results=1), lambda p: [(p("a.txt"), 1)]),
    ("grep one file", lambda fs, p: _grep(fs, "beta", p("a.txt")), lambda p: [(p("a.txt"), 2)]),
    ("grep line text", lambda fs, p: _lines(fs, "return", p("src")), ["    return 1", "    return 'x'"]),
    ("grep invalid regex", lambda fs, p: fs.grep("(unclosed", p()), BackendError),
    ("grep missing dir", lambda fs, p: fs.grep("x", p("nope")), FileNotFoundError),
]


async def _ls(fs: BackendProtocol, path: str) -> list[tuple[str, bool]]:
    return entries(await fs.ls(path))


async def _stat(fs: BackendProtocol, path: str) -> tuple[str, bool, int]:
    info = await fs.stat(path)
    return info.path, info.is_dir, info.size


async def _grep(fs: BackendProtocol, pattern: str, path: str, **kwargs: Any) -> list[tuple[str, int]]:
    return hits(await fs.grep(pattern, path, **kwargs))


async def _lines(fs: BackendProtocol, pattern: str, path: str) -> list[str]:
    return [m.line for m in await fs.grep(pattern, path)]


@pytest.mark.parametrize(("op", "expected"), [pytest.param(op, exp, id=name) for name, op, exp in TABLE])
async def test_behaviour_table(seeded: tuple[BackendProtocol, P], op: Op, expected: Any) -> None:
    fs, p = seeded
    if _is_error(expected):
        with pytest.raises(expected):
            await op(fs, p)
        return
    want = expected(p) if callable(expected) else expected
    assert await op(fs, p) == want


def _is_error(value: Any) -> bool:
    values = value if isinstance(value, tuple) else (value,)
    return all(isinstance(v, type) and issubclass(v, BaseException) for v in values)


async def test_write_creates_parents_and_overwrites(seeded: tuple[BackendProtocol, P]) -> None:
    fs, p = seeded
    await fs.write(p("new/deep/file.md"), "one")
    assert await fs.read(p("new/deep/file.md")) == "one"
    assert (await fs.stat(p("new/deep"))).is_dir
    await fs.write(p("new/deep/file.md"), "two\r\nkeeps CRLF\n")
    assert await fs.read(p("new/deep/file.md")) == "two\r\nkeeps CRLF\n"
    assert (await fs.stat(p("new/deep/file.md"))).size == len(b"two\r\nkeeps CRLF\n")


async def test_write_refuses_directories_and_files_as_parents(seeded: tuple[BackendProtocol, P]) -> None:
    fs, p = seeded
    with pytest.raises(IsADirectoryError):
        await fs.write(p("src"), "x")
    with pytest.raises(NotADirectoryError):
        await fs.write(p("a.txt/child"), "x")
    assert await fs.read(p("a.txt")) == FILES["a.txt"]


async def test_edit_rules(seeded: tuple[BackendProtocol, P]) -> None:
    fs, p = seeded
    assert await fs.edit(p("a.txt"), "beta", "gamma") == 1
    assert await fs.read(p("a.txt")) == "alpha\ngamma\nalpha\n"
    with pytest.raises(EditError, match=r"occurs 2 times.*replace_all=True"):
        await fs.edit(p("a.txt"), "alpha", "omega")
    assert await fs.read(p("a.txt")) == "alpha\ngamma\nalpha\n"  # unchanged after a refused edit
    assert await fs.edit(p("a.txt"), "alpha", "omega", replace_all=True) == 2
    assert await fs.read(p("a.txt")) == "omega\ngamma\nomega\n"
    with pytest.raises(EditError, match="not found"):
        await fs.edit(p("a.txt"), "zeta", "x")
    with pytest.raises(EditError, match="empty"):
        await fs.edit(p("a.txt"), "", "x")
    with pytest.raises(FileNotFoundError):
        await fs.edit(p("nope.txt"), "a", "b")
    with pytest.raises(IsADirectoryError):
        await fs.edit(p("src"), "a", "b")


async def test_delete(seeded: tuple[BackendProtocol, P]) -> None:
    fs, p = seeded
    await fs.delete(p("src/pkg/util.py"))
    assert not await fs.exists(p("src/pkg/util.py"))
    assert await fs.glob("**", p("src")) == [p("src/main.py"), p("src/pkg/data.bin")]
    with pytest.raises(FileNotFoundError):
        await fs.delete(p("src/pkg/util.py"))
    with pytest.raises(IsADirectoryError):
        await fs.delete(p("src"))
    with pytest.raises(IsADirectoryError):
        await fs.delete("/")


async def test_mtime_moves_forward(seeded: tuple[BackendProtocol, P]) -> None:
    fs, p = seeded
    before = (await fs.stat(p("a.txt"))).modified
    await fs.write(p("a.txt"), "changed")
    assert (await fs.stat(p("a.txt"))).modified >= before > 0


@pytest.mark.parametrize(
    ("pattern", "path", "base", "matches"),
    [
        ("**/*.py", "/a.py", "/", True),
        ("**/*.py", "/x/y/z.py", "/", True),
        ("*.py", "/x/z.py", "/", False),
        ("x/**", "/x/y/z", "/", True),
        ("x/**/z", "/x/z", "/", True),
        ("*", "/x/z", "/x", True),
        ("/x/*", "/x/z", "/y", True),
        ("../x/z", "/x/z", "/y", False),
        ("[!a]*", "/b", "/", True),
        ("[!a]*", "/a", "/", False),
    ],
)
def test_match_glob(pattern: str, path: str, base: str, matches: bool) -> None:
    assert match_glob(pattern, path, base) is matches


@pytest.mark.parametrize("kind", ["local", "state"])
async def test_very_deep_trees_do_not_hit_the_recursion_limit(kind: str, tmp_path: Path) -> None:
    fs = make_backend(kind, tmp_path)
    levels = 1_100  # deeper than Python's recursion limit, within the 4,096-byte path limit
    deep = "/" + "d/" * levels + "x.txt"
    try:
        await fs.write(deep, "needle")
        assert await fs.glob("**/x.txt") == [deep]
        assert await fs.glob("**/d/**/*.txt") == [deep]
        assert hits(await fs.grep("needle")) == [(deep, 1)]
    finally:
        remove_deep_dirs(tmp_path / "root", levels)  # shutil.rmtree (pytest's tmp cleanup) recurses too


def remove_deep_dirs(root: Path, levels: int) -> None:
    path = os.path.join(root, *["d"] * levels)
    for _ in range(levels):
        if os.path.isdir(path):
            for name in os.listdir(path):
                if not os.path.isdir(os.path.join(path, name)):
                    os.unlink(os.path.join(path, name))
            os.rmdir(path)
        path = os.path.dirname(path)


# -- StateBackend serialization ---------------------------------------------------------------------------------------


def ticking_clock(start: float = 1_700_000_000.0) -> Callable[[], float]:
    now = [start]

    def clock() -> float:
        now[0] += 1
        return now[0]

    return clock


async def test_state_backend_round_trips_through_json() -> None:
    fs = StateBackend(clock=ticking_clock())
    for rel, content in FILES.items():
        await fs.write(rel, content)
    data = fs.to_dict()
    assert data["version"] == 1
    restored = StateBackend.from_dict(json.loads(json.dumps(data)))
    assert restored.to_dict() == data
    for rel, content in FILES.items():
        assert await restored.read(rel) == content
        assert await restored.stat(rel) == await fs.stat(rel)  # mtimes survive


async def test_state_backend_is_a_pydantic_type() -> None:
    class Session(BaseModel):
        backend: StateBackend

    session = Session(backend=StateBackend({"/notes.md": "remember"}))
    dumped = session.model_dump_json()
    assert json.loads(dumped)["backend"]["files"]["/notes.md"]["content"] == "remember"
    again = Session.model_validate_json(dumped)
    assert await again.backend.read("/notes.md") == "remember"
    assert Session.model_validate({"backend": session.backend}).backend is session.backend
    assert "StateBackendDict" in json.dumps(Session.model_json_schema())


@pytest.mark.parametrize(
    "bad",
    [
        {"version": 2, "files": {}},
        {"files": []},
        {"version": 1, "files": {"/x": {"content": 3}}},
        {"version": 1, "files": {"/x": "just text"}},
        {"version": 1, "files": {"../escape": {"content": "x", "modified": 0}}},
        {"version": 1, "files": {"/a": {"content": "x", "modified": 0}, "/a/b": {"content": "y", "modified": 0}}},
    ],
)
def test_state_backend_from_dict_rejects_malformed_data(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="StateBackend"):
        StateBackend.from_dict(bad)


async def test_state_backend_directories_are_implied() -> None:
    fs = StateBackend({"/a/b/c.txt": "x"})
    assert entries(await fs.ls("/")) == [("/a", True)]
    await fs.delete("/a/b/c.txt")
    assert not await fs.exists("/a")
    assert await fs.ls("/") == []


# -- LocalBackend specifics -------------------------------------------------------------------------------------------


async def test_local_backend_maps_virtual_paths_under_root(tmp_path: Path) -> None:
    root = tmp_path / "does" / "not" / "exist" / "yet"
    fs = LocalBackend(root)
    assert root.is_dir()
    await fs.write("/large_tool_results/x", "payload")
    await fs.write("large_tool_results/y", "payload")
    assert sorted(p.name for p in (root / "large_tool_results").iterdir()) == ["x", "y"]
    (root / "raw.bin").write_bytes(b"ok \xff\xfe end")
    assert await fs.read("/raw.bin") == "ok \ufffd\ufffd end"  # undecodable bytes replaced, not an error


async def test_local_backend_writes_atomically_and_serializes_edits(tmp_path: Path) -> None:
    fs = LocalBackend(tmp_path / "root")
    await fs.write("/counter.txt", "".join(f"slot{i};" for i in range(50)))
    (tmp_path / "root" / "counter.txt").chmod(0o600)
    await asyncio.gather(*(fs.edit("/counter.txt", f"slot{i};", f"done{i};") for i in range(50)))
    assert await fs.read("/counter.txt") == "".join(f"done{i};" for i in range(50))  # no lost update
    assert (tmp_path / "root" / "counter.txt").stat().st_mode & 0o777 == 0o600  # mode kept across rewrites
    assert [p.name for p in (tmp_path / "root").iterdir()] == ["counter.txt"]  # no temporary files left


def test_local_backend_root_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises((NotADirectoryError, FileExistsError)):
        LocalBackend(tmp_path / "file")


# -- CompositeBackend routing ------------------------------------------------------------------------------------------


async def test_composite_routes_by_longest_prefix_and_keeps_full_paths(tmp_path: Path) -> None:
    default, results, mcp = StateBackend(), LocalBackend(tmp_path / "results"), StateBackend()
    fs = CompositeBackend(default, routes={"/large_tool_results/": results, "/large_tool_results/mcp": mcp})
    await fs.write("/notes.md", "n")
    await fs.write("/large_tool_results/call_1", "big")
    await fs.write("/large_tool_results/mcp/search.json", "{}")
    await fs.write("/large_tool_results_old/x", "not routed: a prefix names a directory")

    assert await default.glob("**") == ["/large_tool_results_old/x", "/notes.md"]
    assert (tmp_path / "results" / "large_tool_results" / "call_1").read_text() == "big"  # full virtual path kept
    assert await mcp.glob("**") == ["/large_tool_results/mcp/search.json"]
    assert fs.backend_for("/large_tool_results/mcp/a") is mcp
    assert fs.backend_for("large_tool_results/../large_tool_results/b") is results


async def test_composite_ls_merges_route_prefixes(tmp_path: Path) -> None:
    fs = CompositeBackend(
        StateBackend({"/notes.md": "n"}),
        routes={"/large_tool_results/": LocalBackend(tmp_path / "r"), "/memories/project/": StateBackend()},
    )
    # Route directories are listed even before anything is written there.
    assert entries(await fs.ls("/")) == [("/large_tool_results", True), ("/memories", True), ("/notes.md", False)]
    assert entries(await fs.ls("/memories")) == [("/memories/project", True)]
    assert await fs.ls("/large_tool_results") == []
    assert await fs.exists("/memories/project")
    assert (await fs.stat("/memories")).is_dir
    with pytest.raises(FileNotFoundError):
        await fs.ls("/nowhere")


async def test_composite_glob_and_grep_fan_out(tmp_path: Path) -> None:
    routed = LocalBackend(tmp_path / "r")
    default = StateBackend({"/src/app.py": "TODO: default\n"})
    fs = CompositeBackend(default, routes={"/large_tool_results/": routed})
    await fs.write("/large_tool_results/out.py", "x\nTODO: routed\n")
    await default.write("/large_tool_results/shadowed.py", "TODO: hidden by the route\n")

    assert await fs.glob("**/*.py") == ["/large_tool_results/out.py", "/src/app.py"]
    assert hits(await fs.grep("TODO")) == [("/large_tool_results/out.py", 2), ("/src/app.py", 1)]
    assert hits(await fs.grep("TODO", max_results=1)) == [("/large_tool_results/out.py", 2)]
    assert hits(await fs.grep("TODO", "/large_tool_results")) == [("/large_tool_results/out.py", 2)]
    assert await fs.glob("*", "/large_tool_results") == ["/large_tool_results/out.py"]


def test_composite_rejects_a_root_route() -> None:
    with pytest.raises(ValueError, match="default"):
        CompositeBackend(StateBackend(), routes={"/": StateBackend()})


@pytest.mark.parametrize("kind", ["local", "state", "composite"])
def test_backends_satisfy_the_protocol(kind: str, tmp_path: Path) -> None:
    assert isinstance(make_backend(kind, tmp_path), BackendProtocol)
