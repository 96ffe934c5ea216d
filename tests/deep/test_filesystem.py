"""The file tools and hygiene tools as a model sees them: through `Agent.run` with a scripted `FunctionModel`."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import AbstractToolset

from pydantic_deep.backends import BackendProtocol, LocalBackend, StateBackend
from pydantic_deep.filesystem import (
    FilesystemToolset,
    HygieneToolset,
    cleanup_old_archives,
    number_lines,
    organize_virtual_fs,
)

Call = tuple[str, dict[str, Any]]


async def run_calls(
    toolsets: Sequence[AbstractToolset[Any]], calls: Sequence[Call], deps: Any = None
) -> list[ToolReturnPart]:
    """One model turn per call; returns the tool return parts the model received, in order."""
    received: list[ToolReturnPart] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        received.extend(p for p in last.parts if isinstance(p, ToolReturnPart))
        step = len(received)
        if step < len(calls):
            name, args = calls[step]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{step}")])
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[Any, str] = Agent(FunctionModel(model), toolsets=list(toolsets), deps_type=object)
    result = await agent.run("go", deps=deps)
    assert result.output == "done"
    return received


async def call(backend: BackendProtocol, name: str, **args: Any) -> ToolReturnPart:
    return (await run_calls([FilesystemToolset(backend=backend), HygieneToolset(backend=backend)], [(name, args)]))[0]


# -- read_file ------------------------------------------------------------------------------------------------------


async def test_read_file_numbers_lines_like_cat_n() -> None:
    fs = StateBackend({"/f.py": "import os\n\ndef f():\n    return 1\n"})
    part = await call(fs, "read_file", path="f.py")
    assert part.outcome == "success"
    assert part.content == "     1\timport os\n     2\t\n     3\tdef f():\n     4\t    return 1"


async def test_read_file_pages_with_a_hint_the_model_can_follow() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 26))
    fs = StateBackend({"/big.txt": text})
    pages: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        args: dict[str, Any] = {"path": "/big.txt", "offset": 0, "limit": 10}
        for part in last.parts:
            if isinstance(part, ToolReturnPart):
                pages.append(str(part.content))
                hint = re.search(r'call read_file\("/big.txt", offset=(\d+), limit=(\d+)\)$', str(part.content))
                if hint is None:
                    return ModelResponse(parts=[TextPart("read it all")])
                args = {"path": "/big.txt", "offset": int(hint[1]), "limit": int(hint[2])}
        return ModelResponse(parts=[ToolCallPart("read_file", args)])

    await Agent(FunctionModel(model), toolsets=[FilesystemToolset(backend=fs)]).run("read /big.txt")
    assert len(pages) == 3
    assert pages[0].endswith('... 15 more lines: call read_file("/big.txt", offset=10, limit=10)')
    assert pages[1].splitlines()[0] == "    11\tline 11"
    assert pages[1].endswith('... 5 more lines: call read_file("/big.txt", offset=20, limit=10)')
    numbered = [line for page in pages for line in page.splitlines() if not line.startswith("...")]
    assert [int(line.split("\t")[0]) for line in numbered] == list(range(1, 26))
    assert "".join(line.split("\t", 1)[1] + "\n" for line in numbered) == text  # paged back in full


async def test_read_file_default_limit_and_long_lines() -> None:
    text = "x" * 5_000 + "\n" + "".join(f"{i}\n" for i in range(2_500))
    part = await call(StateBackend({"/log": text}), "read_file", path="/log")
    lines = str(part.content).splitlines()
    assert lines[0] == "     1\t" + "x" * 2_000 + "… [line cut: 3,000 more chars]"
    assert len(lines) == 2_001
    assert lines[-1] == '... 501 more lines: call read_file("/log", offset=2000, limit=2000)'


def test_read_output_stops_at_the_character_budget_with_a_hint() -> None:
    out = number_lines("".join(f"{'y' * 30}\n" for _ in range(10)), "/y", 0, 10, max_output_chars=120)
    assert out.splitlines()[-1] == '... 7 more lines: call read_file("/y", offset=3, limit=10)'


async def test_read_file_edge_cases_are_tool_failures() -> None:
    fs = StateBackend({"/empty": "", "/three": "a\nb\nc"})
    parts = await run_calls(
        [FilesystemToolset(backend=fs)],
        [
            ("read_file", {"path": "/empty"}),
            ("read_file", {"path": "/three", "offset": 3}),
            ("read_file", {"path": "/three", "offset": -1}),
            ("read_file", {"path": "/three", "limit": 0}),
            ("read_file", {"path": "/three", "offset": 2, "limit": 5}),
        ],
    )
    assert [(p.outcome, p.content) for p in parts] == [
        ("success", "(/empty is empty)"),
        ("failed", "offset 3 is past the end of /three, which has 3 lines: call read_file with an offset below 3"),
        ("failed", "offset must be 0 or more (the number of lines to skip), got -1"),
        ("failed", "limit must be at least 1 (the number of lines to return), got 0"),
        ("success", "     3\tc"),
    ]


# -- write_file / edit_file ---------------------------------------------------------------------------------------


async def test_write_then_edit_unique_replace_all_and_not_found() -> None:
    fs = StateBackend()
    parts = await run_calls(
        [FilesystemToolset(backend=fs)],
        [
            ("write_file", {"path": "/app.py", "content": "a = 1\nb = 1\nprint(a)\n"}),
            ("edit_file", {"path": "/app.py", "old_string": "b = 1", "new_string": "b = 2"}),
            ("edit_file", {"path": "/app.py", "old_string": "= ", "new_string": "=  "}),
            ("edit_file", {"path": "/app.py", "old_string": "= ", "new_string": ":= ", "replace_all": True}),
            ("edit_file", {"path": "/app.py", "old_string": "c = 3", "new_string": "c = 4"}),
        ],
    )
    assert [p.outcome for p in parts] == ["success", "success", "failed", "success", "failed"]
    assert parts[0].content == "Wrote /app.py (3 lines, 21 bytes)."
    assert parts[1].content == "Edited /app.py: replaced 1 occurrence."
    assert "occurs 2 times" in str(parts[2].content) and "replace_all=True" in str(parts[2].content)
    assert parts[3].content == "Edited /app.py: replaced 2 occurrences."
    assert "not found" in str(parts[4].content)
    assert await fs.read("/app.py") == "a := 1\nb := 2\nprint(a)\n"


# -- errors reach the model as failed tool calls ---------------------------------------------------------------------


async def test_errors_are_failed_tool_results_and_do_not_use_the_retry_budget(tmp_path: Path) -> None:
    fs = LocalBackend(tmp_path / "root")
    await fs.write("/dir/file.txt", "x")
    failing: list[Call] = [
        ("read_file", {"path": "/missing.txt"}),
        ("read_file", {"path": "/dir"}),
        ("read_file", {"path": "../../etc/passwd"}),
        ("write_file", {"path": "/dir", "content": "x"}),
        ("ls", {"path": "/dir/file.txt"}),
        ("grep", {"pattern": "(unclosed"}),
        ("glob", {"pattern": "*", "path": "/nowhere"}),
        ("edit_file", {"path": "/dir/file.txt", "old_string": "zzz", "new_string": "y"}),
    ]
    toolset = FilesystemToolset(backend=fs, max_retries=0)  # a ModelRetry would end the run on the first failure
    parts = await run_calls([toolset], failing * 2)
    assert [p.outcome for p in parts] == ["failed"] * 16
    messages = [str(p.content) for p in parts[:8]]
    assert messages[0] == "/missing.txt does not exist. Call ls or glob to find the right path."
    assert messages[1] == '/dir is a directory, not a file. Call ls("/dir") to see what is inside it.'
    assert messages[2].startswith("Access denied for '../../etc/passwd'")
    assert messages[3].startswith("/dir is a directory")
    assert messages[4].startswith("/dir/file.txt (or one of its parents) is a file")
    assert messages[5].startswith("invalid regular expression '(unclosed'")
    assert messages[6] == "/nowhere does not exist. Call ls or glob to find the right path."
    assert "not found in /dir/file.txt" in messages[7]
    assert not any(str(tmp_path) in m for m in messages)  # host paths never reach the model


async def test_backend_comes_from_deps_first_then_the_toolset() -> None:
    @dataclass
    class Deps:
        backend: BackendProtocol | None = field(default_factory=lambda: StateBackend({"/who": "deps"}))

    fallback = StateBackend({"/who": "toolset"})
    toolset = FilesystemToolset(backend=fallback)
    from_deps = await run_calls([toolset], [("read_file", {"path": "/who"})], deps=Deps())
    assert from_deps[0].content == "     1\tdeps"
    from_fallback = await run_calls([toolset], [("read_file", {"path": "/who"})], deps=Deps(backend=None))
    assert from_fallback[0].content == "     1\ttoolset"
    nothing = await run_calls([FilesystemToolset()], [("ls", {})])
    assert nothing[0].outcome == "failed"
    assert "No file system is configured" in str(nothing[0].content)


# -- ls / glob / grep -----------------------------------------------------------------------------------------------


async def test_ls_glob_grep_output() -> None:
    fs = StateBackend({"/src/a.py": "def a():\n    pass\n", "/src/b.py": "def b(): ...\n", "/README.md": "# hi\n"})
    parts = await run_calls(
        [FilesystemToolset(backend=fs, max_grep_results=2)],
        [
            ("ls", {}),
            ("glob", {"pattern": "**/*.py"}),
            ("glob", {"pattern": "*.rs"}),
            ("grep", {"pattern": "def", "glob": "*.py"}),
            ("grep", {"pattern": "PASS", "ignore_case": True, "path": "/src"}),
            ("grep", {"pattern": "."}),
            ("grep", {"pattern": "nothing here"}),
        ],
    )
    assert [p.content for p in parts] == [
        "/README.md  (5 bytes)\n/src/",
        "/src/a.py\n/src/b.py",
        "No files under / match '*.rs'.",
        "/src/a.py:1: def a():\n/src/b.py:1: def b(): ...",
        "/src/a.py:2:     pass",
        "/README.md:1: # hi\n/src/a.py:1: def a():\n"
        "(showing the first 2 matches: narrow the pattern, path or glob to see the rest)",
        "No matches for 'nothing here' under /.",
    ]


# -- hygiene ----------------------------------------------------------------------------------------------------------


def clock_at(*times: float) -> Callable[[], float]:
    """A clock for StateBackend: the constructor reads it once, then each write; the last time repeats."""
    it = iter((times[0], *times))
    last = [times[-1]]

    def clock() -> float:
        last[0] = next(it, last[0])
        return last[0]

    return clock


NOW = 1_750_000_000.0
DAY = 86_400.0


async def test_organize_virtual_fs_groups_and_suggests() -> None:
    fs = StateBackend(clock=clock_at(NOW - 3 * DAY, NOW - 2 * DAY, NOW - 60, NOW - 30, NOW - 10, *[NOW] * 60))
    for name in ["a.json", "b.json", "c.json", "d.json"]:
        await fs.write(f"/large_tool_results/{name}", "{}" * 10)
    await fs.write("/notes.md", "n")
    for i in range(60):
        await fs.write(f"/scratch/{i}.txt", "s")
    overview = await organize_virtual_fs(fs, now=NOW)
    assert [(g.prefix, g.files, g.total_bytes) for g in overview.groups] == [
        ("/", 1, 1),
        ("/large_tool_results", 4, 80),
        ("/scratch", 60, 60),
    ]
    results = overview.groups[1]
    assert (results.oldest.path, results.newest.path) == ("/large_tool_results/a.json", "/large_tool_results/d.json")
    assert overview.suggestions == [
        "2 files in /large_tool_results older than 1 day: call cleanup_old_archives('/large_tool_results', "
        "keep_last_n=3) to delete all but the newest 3.",
        "/scratch holds 60 files (more than 50): call cleanup_old_archives('/scratch', keep_last_n=3), or delete "
        "the files you no longer need.",
    ]
    report = str((await call(fs, "organize_virtual_fs")).content)
    assert report.startswith("65 files, 141 bytes in total, by top-level prefix:")
    assert "- /large_tool_results: 4 files, 80 bytes; oldest /large_tool_results/a.json (" in report
    assert "call cleanup_old_archives('/scratch', keep_last_n=3)" in report


async def test_cleanup_old_archives_deletes_exactly_what_it_reports() -> None:
    names = [
        "mcp_search_20250101_120000.json",
        "mcp_search_20250103_120000.json",
        "mcp_search_20250102_120000.json",
        "mcp_fetch_20241231_235959.json",
        "no_stamp_old.txt",  # mtime NOW - 400 days: older than every stamp
        "no_stamp_new.txt",  # mtime NOW: the newest of all
    ]
    stamps = [NOW] * 4 + [NOW - 400 * DAY, NOW]
    fs = StateBackend(clock=clock_at(*stamps, NOW))
    for name in names:
        await fs.write(f"/large_tool_results/{name}", "x")
    await fs.write("/keep/me.txt", "not under the prefix")
    before = set(await fs.glob("**"))

    part = await call(fs, "cleanup_old_archives", prefix="/large_tool_results", keep_last_n=3)
    after = set(await fs.glob("**"))
    reported = {line[2:] for line in str(part.content).splitlines() if line.startswith("- ")}
    assert reported == before - after
    assert reported == {
        "/large_tool_results/mcp_search_20250101_120000.json",
        "/large_tool_results/mcp_fetch_20241231_235959.json",
        "/large_tool_results/no_stamp_old.txt",
    }
    assert str(part.content).startswith("Removed 3 files under /large_tool_results (kept the newest 3):")


async def test_cleanup_by_name_prefix_and_edge_cases() -> None:
    fs = StateBackend({f"/large_tool_results/mcp_search_2025010{i}_000000.json": "x" for i in range(1, 6)})
    await fs.write("/large_tool_results/other.json", "x")
    result = await cleanup_old_archives(fs, "/large_tool_results/mcp_search_", keep_last_n=2)
    assert result.removed == [f"/large_tool_results/mcp_search_2025010{i}_000000.json" for i in (1, 2, 3)]
    assert result.kept == [f"/large_tool_results/mcp_search_2025010{i}_000000.json" for i in (4, 5)]
    assert await fs.exists("/large_tool_results/other.json")

    again = await cleanup_old_archives(fs, "/large_tool_results/mcp_search_", keep_last_n=2)
    assert again.removed == [] and again.render().startswith("Nothing to remove under")
    missing = await cleanup_old_archives(fs, "/nowhere", keep_last_n=0)
    assert missing.removed == [] and missing.kept == []

    parts = await run_calls(
        [HygieneToolset(backend=fs)],
        [
            ("cleanup_old_archives", {"prefix": "/"}),
            ("cleanup_old_archives", {"prefix": "/large_tool_results", "keep_last_n": -1}),
            ("cleanup_old_archives", {"prefix": "../outside"}),
        ],
    )
    assert [p.outcome for p in parts] == ["failed"] * 3
    assert "refusing to clean up the whole file system" in str(parts[0].content)
    assert len(await fs.glob("**")) == 3


class FlakyDelete(StateBackend):
    async def delete(self, path: str) -> None:
        if path.endswith("locked.json"):
            raise PermissionError(13, "Permission denied", path)
        await super().delete(path)


async def test_cleanup_reports_files_it_could_not_delete() -> None:
    fs = FlakyDelete(clock=clock_at(1.0, 2.0, 3.0))
    for name in ("a_locked.json", "b.json", "c.json"):
        await fs.write(f"/arch/{name}", "x")
    result = await cleanup_old_archives(fs, "/arch", keep_last_n=1)
    assert result.removed == ["/arch/b.json"]
    assert list(result.failed) == ["/arch/a_locked.json"]
    assert await fs.glob("**") == ["/arch/a_locked.json", "/arch/c.json"]
    assert "Could not remove 1 file:" in result.render()


async def test_cleanup_on_disk_uses_name_timestamps_over_mtime(tmp_path: Path) -> None:
    fs = LocalBackend(tmp_path / "root")
    await fs.write("/large_tool_results/out_20240101_000000.json", "old by name, touched recently")
    await fs.write("/large_tool_results/out_20250101_000000.json", "new by name")
    await fs.write("/large_tool_results/plain.txt", "no stamp, old mtime")
    os.utime(tmp_path / "root/large_tool_results/plain.txt", (NOW - 400 * DAY, NOW - 400 * DAY))
    result = await cleanup_old_archives(fs, "large_tool_results", keep_last_n=1)
    assert result.kept == ["/large_tool_results/out_20250101_000000.json"]
    assert sorted(p.name for p in (tmp_path / "root/large_tool_results").iterdir()) == ["out_20250101_000000.json"]
    assert result.removed == ["/large_tool_results/out_20240101_000000.json", "/large_tool_results/plain.txt"]


@pytest.mark.parametrize("toolset", [FilesystemToolset, HygieneToolset])
def test_toolsets_are_function_toolsets(toolset: type[Any]) -> None:
    from pydantic_ai import FunctionToolset

    assert issubclass(toolset, FunctionToolset)
    names = set(toolset().tools)
    expected = (
        {"ls", "read_file", "write_file", "edit_file", "glob", "grep"}
        if toolset is FilesystemToolset
        else {"organize_virtual_fs", "cleanup_old_archives"}
    )
    assert names == expected
