"""The eviction archive (`/large_tool_results/`) is for reading back what a preview points at, not part of the
project: `ls`, `glob` and `grep` leave it out unless the path given is inside it (then they work as usual), and
`read_file` of the preview's path still works. Through `create_deep_agent` with a workspace on disk."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic_ai import ToolFailed
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep import DeepAgentDeps, create_deep_agent
from pydantic_deep.backends import GrepMatch, LocalBackend, StateBackend
from pydantic_deep.eviction import EvictionProcessor
from pydantic_deep.filesystem import FilesystemToolset

WORD = "zanzibar_lease"
SOURCE = f"import threading\n\n\ndef acquire(pool):\n    return pool.take({WORD}=True)\n"


def test_log() -> str:
    """8,000 lines that all mention the word: the one source file holding it is what a search must find."""
    return "\n".join(f"tests/test_pool.py:{i}: conn = pool.acquire({WORD}={i % 2 == 0})" for i in range(8_000))


test_log.__test__ = False  # type: ignore[attr-defined]  # a tool, not a test


class Script:
    """Runs the tests (an output evicted to the archive), then looks around the workspace and into the archive."""

    def __init__(self) -> None:
        self.saved_at = ""
        self.seen: dict[str, str] = {}

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("test_log", {}, tool_call_id="run")])
        if returns[0].tool_call_id == "run":
            found = re.search(r"saved to (\S+)\.", str(returns[0].content))
            assert found is not None, returns[0].content
            self.saved_at = found.group(1)
            archive = self.saved_at.rsplit("/", 1)[0]
            calls = {
                "grep_root": ("grep", {"pattern": WORD, "path": "/"}),
                "grep_src": ("grep", {"pattern": "acquire\\(", "path": "/"}),
                "ls_root": ("ls", {"path": "/"}),
                "glob_all": ("glob", {"pattern": "**/*"}),
                "grep_archive": ("grep", {"pattern": WORD, "path": archive}),
                "ls_archive": ("ls", {"path": archive}),
                "glob_archive": ("glob", {"pattern": "*", "path": archive}),
                "read_back": ("read_file", {"path": self.saved_at, "offset": 7_998, "limit": 5}),
            }
            return ModelResponse(
                parts=[ToolCallPart(tool, args, tool_call_id=key) for key, (tool, args) in calls.items()]
            )
        self.seen = {p.tool_call_id: str(p.content) for p in returns}
        return ModelResponse(parts=[TextPart("done")])


def _deps(kind: str, tmp_path: Path) -> DeepAgentDeps:
    workspace = tmp_path / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "pool.py").write_text(SOURCE)
    (workspace / "README.md").write_text("# pool\n")
    if kind == "on_disk":  # the archive in the session's folder, routed under /large_tool_results/
        return DeepAgentDeps.on_disk(workspace, base_dir=tmp_path / "state", session_id="s1")
    # the archive a real folder inside the workspace
    return DeepAgentDeps(backend=LocalBackend(workspace), base_dir=tmp_path / "state", session_id="s1")


@pytest.mark.parametrize("kind", ["on_disk", "workspace"])
async def test_grep_ls_and_glob_leave_the_archive_out_unless_asked_inside_it(kind: str, tmp_path: Path) -> None:
    script = Script()
    agent = create_deep_agent(FunctionModel(script), tools=[test_log])
    result = await agent.run("run the tests, then find where the lease is taken", deps=_deps(kind, tmp_path))
    assert result.output == "done"
    seen = script.seen
    assert script.saved_at.startswith("/large_tool_results/")  # the preview points into the archive
    assert seen["grep_root"] == f"/src/pool.py:5:     return pool.take({WORD}=True)"  # the one source file, only
    assert seen["grep_src"] == "/src/pool.py:4: def acquire(pool):"
    assert "large_tool_results" not in seen["ls_root"] and "/src/" in seen["ls_root"]
    assert seen["glob_all"].splitlines() == ["/README.md", "/src/pool.py"]
    # inside the archive everything works as usual
    archive_matches = seen["grep_archive"].splitlines()
    assert len(archive_matches) == 201 and archive_matches[0].startswith(f"{script.saved_at}:1: ")
    assert "showing the first 200 matches" in archive_matches[-1]
    assert script.saved_at in seen["ls_archive"] and script.saved_at in seen["glob_archive"].splitlines()
    assert f"pool.acquire({WORD}=True)" in seen["read_back"] and "7999" in seen["read_back"]


async def test_the_file_tools_hide_any_directories_they_are_given() -> None:
    backend = StateBackend(
        {
            "/app.py": "token = 1\n",
            "/cache/evicted/a.txt": "token here\n" * 500,
            "/cache/keep.txt": "token kept\n",
            "/notes/token.md": "token\n",
        }
    )
    tools = FilesystemToolset(backend=backend, hidden_dirs=["/cache/evicted/"], max_grep_results=3)
    ctx: Any = SimpleNamespace(deps=None)  # no run deps: the toolset's own backend
    grep = await tools._grep(ctx, "token")
    assert grep.splitlines() == ["/app.py:1: token = 1", "/cache/keep.txt:1: token kept", "/notes/token.md:1: token"]
    assert await tools._glob(ctx, "**/*.txt") == "/cache/keep.txt"
    assert await tools._ls(ctx, "/cache") == "/cache/keep.txt  (11 bytes)"
    inside = await tools._grep(ctx, "token", "/cache/evicted")
    assert inside.count("/cache/evicted/a.txt:") == 3 and "showing the first 3 matches" in inside
    assert await tools._glob(ctx, "*", "/cache/evicted/") == "/cache/evicted/a.txt"
    assert await tools._grep(ctx, "token", "/cache/evicted/a.txt") == inside  # a file inside it, too
    assert await tools._grep(ctx, "token", "/", glob="cache/*.txt") == "/cache/keep.txt:1: token kept"


def test_create_deep_agent_hides_the_archive_of_its_eviction_processor() -> None:
    agent = create_deep_agent(FunctionModel(Script()), eviction=EvictionProcessor(eviction_path="/archive/evicted/"))
    [tools] = [t for t in agent.toolsets if isinstance(t, FilesystemToolset)]
    assert tools.hidden_dirs == ("/archive/evicted", "/large_tool_results")
    with pytest.raises(ValueError, match="would hide every file"):
        FilesystemToolset(hidden_dirs=["/"])


async def test_a_search_around_the_archive_skips_what_a_directory_search_skips(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("token = 1\n")
    os.mkfifo(tmp_path / "pipe")  # never opened: a search of the directory skips it, and so does this one
    (tmp_path / "large_tool_results").mkdir()
    (tmp_path / "large_tool_results" / "run_1").write_text("token\n" * 50)
    tools = FilesystemToolset(backend=LocalBackend(tmp_path))
    ctx: Any = SimpleNamespace(deps=None)
    assert await tools._grep(ctx, "token") == "/app.py:1: token = 1"
    with pytest.raises(ToolFailed, match="invalid regular expression"):
        await tools._grep(ctx, "token(")
    assert "/large_tool_results" not in await tools._ls(ctx, "/")


async def test_without_an_archive_the_search_is_one_plain_search() -> None:
    calls: list[str] = []

    class Recording(StateBackend):
        async def grep(self, pattern: str, path: str = "/", **kwargs: Any) -> list[GrepMatch]:
            calls.append(path)
            return await super().grep(pattern, path, **kwargs)

    tools = FilesystemToolset(backend=Recording({"/a/x.py": "token\n", "/b.py": "token\n"}))
    ctx: Any = SimpleNamespace(deps=None)
    assert await tools._grep(ctx, "token") == "/a/x.py:1: token\n/b.py:1: token"
    assert calls == ["/"]
