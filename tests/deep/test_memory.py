"""`AgentMemoryToolset` as a model sees it: instructions through `FunctionModel`'s `AgentInfo`, tools through
`Agent.run` with scripted tool calls, and concurrent writers that must all land."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ToolFailed
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep.backends import BackendProtocol, CompositeBackend, FileInfo, GrepMatch, LocalBackend, StateBackend
from pydantic_deep.memory import AgentMemoryToolset

PATH = "/.pydantic-deep/main/MEMORY.md"
Call = tuple[str, dict[str, Any]]


class Script:
    """A `FunctionModel` function: one response per step (a list of tool calls, or the final text), recording the
    instructions of every request and the tool results the model received."""

    def __init__(self, steps: Sequence[Sequence[Call]]) -> None:
        self.steps = list(steps)
        self.instructions: list[str | None] = []
        self.received: list[ToolReturnPart] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        self.received.extend(p for p in last.parts if isinstance(p, ToolReturnPart))
        self.instructions.append(info.instructions)
        step = len(self.instructions) - 1
        if step < len(self.steps):
            calls = self.steps[step]
            return ModelResponse(
                parts=[ToolCallPart(name, args, tool_call_id=f"c{step}_{i}") for i, (name, args) in enumerate(calls)]
            )
        return ModelResponse(parts=[TextPart("done")])


async def run(memory: AgentMemoryToolset, *steps: Sequence[Call]) -> Script:
    script = Script(steps)
    agent: Agent[None, str] = Agent(FunctionModel(script), capabilities=[memory])
    result = await agent.run("go")
    assert result.output == "done"
    return script


def lines(n: int) -> str:
    return "".join(f"fact {i:03d}\n" for i in range(1, n + 1))


# -- instructions ---------------------------------------------------------------------------------------------------


async def test_instructions_show_the_first_200_lines_and_not_line_201() -> None:
    memory = AgentMemoryToolset(backend=StateBackend({PATH: lines(250)}))
    script = await run(memory)
    (instructions,) = script.instructions
    assert instructions is not None
    assert "## Agent Memory" in instructions
    shown = [line for line in instructions.splitlines() if line.startswith("fact ")]
    assert shown == [f"fact {i:03d}" for i in range(1, 201)]
    assert "fact 201" not in instructions
    assert "[50 more lines of memory not shown: call read_memory(offset=200) to read them]" in instructions


async def test_instructions_follow_max_lines_and_show_everything_when_it_fits() -> None:
    short = await run(AgentMemoryToolset(backend=StateBackend({PATH: lines(3)})))
    assert short.instructions[0] is not None
    assert "fact 001\nfact 002\nfact 003" in short.instructions[0]
    assert "more line" not in short.instructions[0]

    five = await run(AgentMemoryToolset(backend=StateBackend({PATH: lines(6)}), max_lines=5))
    assert five.instructions[0] is not None
    assert "fact 005" in five.instructions[0] and "fact 006" not in five.instructions[0]
    assert "[1 more line of memory not shown: call read_memory(offset=5) to read them]" in five.instructions[0]

    none = await run(AgentMemoryToolset(backend=StateBackend({PATH: lines(2)}), max_lines=0))
    assert none.instructions[0] is not None
    assert "fact" not in none.instructions[0]
    assert "2 more lines of memory not shown" in none.instructions[0]


async def test_instructions_say_how_to_write_an_empty_memory() -> None:
    script = await run(AgentMemoryToolset(backend=StateBackend()))
    assert script.instructions[0] is not None
    assert script.instructions[0].startswith("## Agent Memory\nYour memory is empty.")
    assert "write_memory(content)" in script.instructions[0]


async def test_instructions_are_rebuilt_for_every_request() -> None:
    script = await run(AgentMemoryToolset(backend=StateBackend()), [("write_memory", {"content": "the user is Ada"})])
    first, second = script.instructions
    assert first is not None and second is not None
    assert "the user is Ada" not in first
    assert "the user is Ada" in second


async def test_instructions_cut_very_long_lines() -> None:
    long = "x" * 5_000
    script = await run(AgentMemoryToolset(backend=StateBackend({PATH: long + "\nshort\n"})))
    assert script.instructions[0] is not None
    assert long not in script.instructions[0]
    assert "[line cut: 3,000 more chars; read_memory shows it whole]" in script.instructions[0]
    assert "\nshort" in script.instructions[0]


async def test_unreadable_memory_does_not_end_the_run() -> None:
    fs = StateBackend({PATH + "/oops": "MEMORY.md is a directory here"})
    script = await run(AgentMemoryToolset(backend=fs), [("write_memory", {"content": "x"})])
    assert script.instructions[0] is not None
    assert "Memory is unavailable: could not read memory at /.pydantic-deep/main/MEMORY.md" in script.instructions[0]
    (failed,) = script.received
    assert failed.outcome == "failed"
    assert "could not write memory at /.pydantic-deep/main/MEMORY.md: it is a directory" in str(failed.content)


# -- tools ----------------------------------------------------------------------------------------------------------


async def test_write_read_update_through_agent_run() -> None:
    fs = StateBackend()
    script = await run(
        AgentMemoryToolset(backend=fs),
        [("write_memory", {"content": "- user prefers tabs"})],
        [("write_memory", {"content": "- project uses uv\n"})],
        [("update_memory", {"old_text": "tabs", "new_text": "spaces"})],
        [("read_memory", {})],
        [("update_memory", {"old_text": "- project uses uv\n", "new_text": ""})],
    )
    assert [p.outcome for p in script.received] == ["success"] * 5
    assert [p.content for p in script.received] == [
        f"Saved to memory (1 line in {PATH}).",
        f"Saved to memory (2 lines in {PATH}).",
        f"Memory updated (2 lines in {PATH}).",
        "- user prefers spaces\n- project uses uv",
        f"Memory updated (1 line in {PATH}).",
    ]
    assert await fs.read(PATH) == "- user prefers spaces\n"


async def test_write_memory_keeps_entries_on_their_own_lines() -> None:
    fs = StateBackend({PATH: "no trailing newline"})
    await run(AgentMemoryToolset(backend=fs), [("write_memory", {"content": "next"})])
    assert await fs.read(PATH) == "no trailing newline\nnext\n"


async def test_write_memory_creates_the_file_and_its_directories(tmp_path: Path) -> None:
    memory = AgentMemoryToolset(memory_dir="state/mem", agent_name="researcher", backend=LocalBackend(tmp_path))
    assert memory.path == "/state/mem/researcher/MEMORY.md"
    await run(memory, [("write_memory", {"content": "hello"})])
    assert (tmp_path / "state/mem/researcher/MEMORY.md").read_text() == "hello\n"


async def test_update_memory_errors_reach_the_model_and_the_run_goes_on() -> None:
    fs = StateBackend({PATH: "- likes tea\n- likes tea cakes\n"})
    script = await run(
        AgentMemoryToolset(backend=fs),
        [("update_memory", {"old_text": "coffee", "new_text": "x"})],
        [("update_memory", {"old_text": "likes tea", "new_text": "x"})],
        [("update_memory", {"old_text": "", "new_text": "x"})],
        [("write_memory", {"content": "  \n"})],
        [("update_memory", {"old_text": "- likes tea\n", "new_text": "- likes coffee\n"})],
    )
    outcomes = [(p.outcome, str(p.content)) for p in script.received]
    assert [o for o, _ in outcomes] == ["failed", "failed", "failed", "failed", "success"]  # no retry budget used up
    assert outcomes[0][1].startswith("old_text was not found in memory: call read_memory")
    assert outcomes[1][1].startswith("old_text was found 2 times in memory: include more surrounding text")
    assert outcomes[2][1].startswith("old_text is empty")
    assert outcomes[3][1].startswith("content is empty")
    assert await fs.read(PATH) == "- likes coffee\n- likes tea cakes\n"


async def test_update_memory_without_a_file_fails_clearly() -> None:
    fs = StateBackend()
    script = await run(AgentMemoryToolset(backend=fs), [("update_memory", {"old_text": "a", "new_text": "b"})])
    (part,) = script.received
    assert part.outcome == "failed"
    assert "MEMORY.md does not exist yet" in str(part.content)
    assert not await fs.exists(PATH)


async def test_failures_are_tool_failed_when_called_directly() -> None:
    memory = AgentMemoryToolset(backend=StateBackend({PATH: "a a\n"}))
    with pytest.raises(ToolFailed, match="found 2 times"):
        await memory.update_memory("a", "b")


async def test_read_memory_pages_long_files_and_reports_empty() -> None:
    fs = StateBackend()
    memory = AgentMemoryToolset(backend=fs)
    assert (await memory.read_memory()).startswith("Memory is empty.")
    await fs.write(PATH, lines(2_500))
    first = await memory.read_memory()
    assert first.splitlines()[:2] == ["fact 001", "fact 002"]
    assert first.endswith("[memory lines 1-1000 of 2500; call read_memory(offset=1000) for the rest]")
    last = await memory.read_memory(offset=2_400, limit=500)
    assert last.splitlines()[0] == "fact 2401"
    assert last.endswith("[memory lines 2401-2500 of 2500]")
    with pytest.raises(ToolFailed, match="past the end of memory, which has 2500 lines"):
        await memory.read_memory(offset=2_500)
    with pytest.raises(ToolFailed, match="limit must be at least 1"):
        await memory.read_memory(limit=0)


# -- concurrency ----------------------------------------------------------------------------------------------------


async def test_twenty_parallel_write_memory_calls_in_one_response_all_land(tmp_path: Path) -> None:
    memory = AgentMemoryToolset(backend=LocalBackend(tmp_path))
    calls = [("write_memory", {"content": f"entry {i}"}) for i in range(20)]
    script = await run(memory, calls)
    assert [p.outcome for p in script.received] == ["success"] * 20
    stored = (tmp_path / ".pydantic-deep/main/MEMORY.md").read_text().splitlines()
    assert sorted(stored) == sorted(f"entry {i}" for i in range(20))


async def test_two_instances_on_the_same_file_do_not_lose_writes(tmp_path: Path) -> None:
    one = AgentMemoryToolset(backend=LocalBackend(tmp_path))
    two = AgentMemoryToolset(backend=LocalBackend(tmp_path))  # another backend object over the same directory
    await one.write_memory("base")
    await asyncio.gather(
        *(one.write_memory(f"one {i}") for i in range(20)),
        *(two.write_memory(f"two {i}") for i in range(20)),
        two.update_memory("base", "base (edited)"),
    )
    stored = (tmp_path / ".pydantic-deep/main/MEMORY.md").read_text().splitlines()
    assert len(stored) == 41
    assert set(stored) == {"base (edited)"} | {f"one {i}" for i in range(20)} | {f"two {i}" for i in range(20)}


class SlowBackend:
    """A backend over another one that yields to the event loop before every read, counting reads and writes.

    Two of these over one store look like two unrelated storages (no shared lock), so only the compare-and-swap
    keeps their writers from overwriting each other. The write itself does not yield: like a backend with an atomic
    write, nothing can land between the re-read that checks the version and the write."""

    def __init__(self, inner: BackendProtocol) -> None:
        self.inner = inner
        self.reads = 0
        self.writes = 0

    async def read(self, path: str) -> str:
        await asyncio.sleep(0.001)
        self.reads += 1
        return await self.inner.read(path)

    async def write(self, path: str, content: str) -> None:
        self.writes += 1
        await self.inner.write(path, content)

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        raise NotImplementedError

    async def ls(self, path: str = "/") -> list[FileInfo]:
        raise NotImplementedError

    async def glob(self, pattern: str, path: str = "/") -> list[str]:
        raise NotImplementedError

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        ignore_case: bool = False,
        max_results: int = 200,
    ) -> list[GrepMatch]:
        raise NotImplementedError

    async def delete(self, path: str) -> None:
        raise NotImplementedError

    async def exists(self, path: str) -> bool:
        return await self.inner.exists(path)

    async def stat(self, path: str) -> FileInfo:
        return await self.inner.stat(path)


async def test_compare_and_swap_keeps_writers_without_a_shared_lock() -> None:
    store = StateBackend()
    left, right = SlowBackend(store), SlowBackend(store)
    one, two = AgentMemoryToolset(backend=left), AgentMemoryToolset(backend=right)
    await asyncio.gather(
        *(one.write_memory(f"one {i}") for i in range(10)),
        *(two.write_memory(f"two {i}") for i in range(10)),
        two.update_memory("one 0", "one 0 (edited)"),  # may run before "one 0" exists: then it fails, cleanly
        return_exceptions=True,
    )
    stored = (await store.read(PATH)).splitlines()
    assert sorted(s.removesuffix(" (edited)") for s in stored) == sorted(
        [f"one {i}" for i in range(10)] + [f"two {i}" for i in range(10)]
    )
    # Without conflicts a write reads 3 times (before, version check, landed check): the writers did collide.
    assert left.writes + right.writes >= 20
    assert left.reads + right.reads > 3 * 20


def test_processes_writing_at_once_do_not_lose_writes(tmp_path: Path) -> None:
    """Two processes append to one LocalBackend MEMORY.md at the same time (started together after importing)."""
    writer = textwrap.dedent(
        """
        import asyncio, os, sys, time
        from pydantic_deep.memory import AgentMemoryToolset

        async def main(tag: str) -> None:
            memory = AgentMemoryToolset()
            open(f"ready-{tag}", "w").close()
            while not os.path.exists("go"):
                time.sleep(0.005)
            for i in range(30):
                await memory.write_memory(f"{tag} {i}")

        asyncio.run(main(sys.argv[1]))
        """
    )
    tags = ("a", "b")
    procs = [subprocess.Popen([sys.executable, "-c", writer, tag], cwd=tmp_path) for tag in tags]
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready-{tag}").exists() for tag in tags):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a writer did not start"
            time.sleep(0.01)
        (tmp_path / "go").touch()
        assert [p.wait(timeout=60) for p in procs] == [0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    stored = (tmp_path / ".pydantic-deep/main/MEMORY.md").read_text().splitlines()
    assert sorted(stored) == sorted(f"{tag} {i}" for tag in tags for i in range(30))


# -- persistence and the default backend ----------------------------------------------------------------------------


async def test_memory_survives_a_new_agent_and_session(tmp_path: Path) -> None:
    await run(AgentMemoryToolset(backend=LocalBackend(tmp_path)), [("write_memory", {"content": "deploys go via CI"})])
    later = await run(AgentMemoryToolset(backend=LocalBackend(tmp_path)))  # new instance, new agent, no history
    assert later.instructions[0] is not None
    assert "deploys go via CI" in later.instructions[0]


async def test_memory_does_not_depend_on_the_message_history() -> None:
    """What a history processor (a compaction) drops from the messages, the instructions still carry."""
    fs = StateBackend({PATH: "remember me\n"})
    script = Script([[("read_memory", {})]])

    def forget(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-1:]

    agent: Agent[None, str] = Agent(
        FunctionModel(script), capabilities=[AgentMemoryToolset(backend=fs), ProcessHistory(forget)]
    )
    await agent.run("go")
    assert len(script.instructions) == 2
    assert all(i is not None and "remember me" in i for i in script.instructions)


async def test_default_backend_is_a_local_backend_at_the_cwd_when_first_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "built").mkdir()
    (tmp_path / "used").mkdir()
    monkeypatch.chdir(tmp_path / "built")
    memory = AgentMemoryToolset()
    assert memory.backend is None
    monkeypatch.chdir(tmp_path / "used")
    await run(memory, [("write_memory", {"content": "where am I"})])
    backend = memory.get_backend()
    assert isinstance(backend, LocalBackend)
    assert backend.root == (tmp_path / "used").resolve()
    assert (tmp_path / "used/.pydantic-deep/main/MEMORY.md").read_text() == "where am I\n"
    assert not (tmp_path / "built/.pydantic-deep").exists()


async def test_works_through_a_composite_backend(tmp_path: Path) -> None:
    fs = CompositeBackend(StateBackend(), routes={"/.pydantic-deep/": LocalBackend(tmp_path)})
    await run(AgentMemoryToolset(backend=fs), [("write_memory", {"content": "on disk"})])
    assert (tmp_path / ".pydantic-deep/main/MEMORY.md").read_text() == "on disk\n"


async def test_plugs_into_create_deep_agent(tmp_path: Path) -> None:
    from pydantic_deep.agent import create_deep_agent
    from pydantic_deep.deps import DeepAgentDeps

    script = Script([[("write_memory", {"content": "via the harness"})]])
    memory = AgentMemoryToolset(backend=LocalBackend(tmp_path))
    agent = create_deep_agent(FunctionModel(script), memory=memory, context_manager=False)
    result = await agent.run("go", deps=DeepAgentDeps(base_dir=None))
    assert result.output == "done"
    assert script.instructions[-1] is not None and "via the harness" in script.instructions[-1]


# -- construction ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../x", "..", ".", "a/b", "a\\b", "", "  ", "x\x00y", "n" * 256])
def test_hostile_agent_names_are_rejected_at_construction(name: str) -> None:
    with pytest.raises(ValueError, match="agent_name must be a plain directory name"):
        AgentMemoryToolset(agent_name=name)


@pytest.mark.parametrize("memory_dir", ["../outside", "/..", "a\\b"])
def test_memory_dirs_outside_the_backend_are_rejected(memory_dir: str) -> None:
    with pytest.raises(ValueError, match="is not a usable path inside the backend"):
        AgentMemoryToolset(memory_dir=memory_dir)


def test_other_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_lines"):
        AgentMemoryToolset(max_lines=-1)
    with pytest.raises(TypeError, match="BackendProtocol"):
        AgentMemoryToolset(backend="not a backend")  # pyright: ignore[reportArgumentType]
    assert AgentMemoryToolset(memory_dir=Path("x") / "y", agent_name="a").path == "/x/y/a/MEMORY.md"  # pyright: ignore[reportArgumentType]


# -- where memory lives in a run ------------------------------------------------------------------------------------


def workspace_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(an empty current directory, a base_dir elsewhere): a run must write nothing in the first."""
    cwd, base = tmp_path / "cwd", tmp_path / "elsewhere" / ".pydantic-deep"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd, base


async def test_create_deep_agent_memory_lives_under_deps_base_dir_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: `create_deep_agent(memory=True)` wrote ./.pydantic-deep/main/MEMORY.md whatever the deps said."""
    from pydantic_deep import DeepAgentDeps, create_deep_agent

    cwd, base = workspace_dirs(tmp_path, monkeypatch)
    script = Script([[("write_memory", {"content": "deploys go via CI"})]])
    agent = create_deep_agent(FunctionModel(script), memory=True)
    result = await agent.run("go", deps=DeepAgentDeps(base_dir=base, session_id="s1"))
    assert result.output == "done"
    assert [p.outcome for p in script.received] == ["success"]
    assert (base / "main" / "MEMORY.md").read_text() == "deploys go via CI\n"
    assert list(cwd.iterdir()) == []
    later = Script([])  # a new session sees it in its instructions
    await create_deep_agent(FunctionModel(later), memory=True).run("hi", deps=DeepAgentDeps(base_dir=base))
    assert later.instructions[0] is not None and "deploys go via CI" in later.instructions[0]
    assert list(cwd.iterdir()) == []


async def test_without_base_dir_memory_lives_on_the_runs_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_deep import DeepAgentDeps, create_deep_agent

    cwd, _ = workspace_dirs(tmp_path, monkeypatch)
    script = Script([[("write_memory", {"content": "kept with the session"})]])
    deps = DeepAgentDeps(base_dir=None)
    await create_deep_agent(FunctionModel(script), memory=True).run("go", deps=deps)
    assert await deps.backend.read("/.pydantic-deep/main/MEMORY.md") == "kept with the session\n"
    assert list(cwd.iterdir()) == []


async def test_agent_names_come_from_the_toolset_then_the_deps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_deep import DeepAgentDeps, create_deep_agent

    _, base = workspace_dirs(tmp_path, monkeypatch)
    for memory, deps_name, expected in [
        (True, "coder", "coder"),
        (AgentMemoryToolset(agent_name="researcher"), "coder", "researcher"),
    ]:
        script = Script([[("write_memory", {"content": f"from {expected}"})]])
        deps = DeepAgentDeps(base_dir=base, agent_name=deps_name)
        await create_deep_agent(FunctionModel(script), memory=memory, context_manager=False).run("go", deps=deps)
        assert (base / expected / "MEMORY.md").read_text() == f"from {expected}\n"


async def test_a_hostile_agent_name_in_the_deps_is_a_tool_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_deep import DeepAgentDeps, create_deep_agent

    _, base = workspace_dirs(tmp_path, monkeypatch)
    script = Script([[("write_memory", {"content": "x"})]])
    deps = DeepAgentDeps(base_dir=base, agent_name="../escaped")
    await create_deep_agent(FunctionModel(script), memory=True, context_manager=False).run("go", deps=deps)
    assert script.received[0].outcome == "failed"
    assert "deps.agent_name must be a plain directory name" in str(script.received[0].content)
    assert script.instructions[0] is not None and "Memory is unavailable" in script.instructions[0]
    assert not (base.parent / "escaped").exists() and not base.exists()


async def test_reading_a_memory_never_written_creates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic_deep import DeepAgentDeps, create_deep_agent

    cwd, base = workspace_dirs(tmp_path, monkeypatch)
    script = Script([[("read_memory", {})]])
    deps = DeepAgentDeps(base_dir=base)
    await create_deep_agent(FunctionModel(script), memory=True, context_manager=False).run("go", deps=deps)
    assert str(script.received[0].content).startswith("Memory is empty")
    assert not base.exists() and list(cwd.iterdir()) == []


async def test_overlapping_occurrences_are_ambiguous_in_update_memory() -> None:
    """Regression: `aa` in `aaa` counted once (str.count) and the update went through."""
    fs = StateBackend({PATH: "aaa\n"})
    script = await run(AgentMemoryToolset(backend=fs), [("update_memory", {"old_text": "aa", "new_text": "b"})])
    assert script.received[0].outcome == "failed"
    assert "found 2 times in memory (some occurrences overlap)" in str(script.received[0].content)
    assert await fs.read(PATH) == "aaa\n"
