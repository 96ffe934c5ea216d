"""CheckpointMiddleware and FileCheckpointStore: pointers into the history, per turn or per tool call, rewind."""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep import (
    Checkpoint,
    CheckpointError,
    CheckpointMiddleware,
    CheckpointNotFoundError,
    DeepAgentDeps,
    FileCheckpointStore,
    ForkPointError,
    InvalidCheckpointIdError,
    SessionManager,
    create_deep_agent,
)
from pydantic_deep.checkpoints import _store
from summarization_pydantic_ai import ContextManagerMiddleware, get_message_id, is_summary_message, validate_history


def two_rounds(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Each turn: two rounds of tool calls (the first with two parallel calls), then a text answer."""
    rounds = 0
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and not any(isinstance(p, ToolReturnPart) for p in message.parts):
            break
        rounds += isinstance(message, ModelResponse)
    if rounds == 0:
        return ModelResponse(
            parts=[ToolCallPart("write_file", {"path": "/a", "content": "a"}), ToolCallPart("ls", {"path": "/"})]
        )
    if rounds == 1:
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "/a"})])
    return ModelResponse(parts=[TextPart("done")])


def agent_with(checkpoints: CheckpointMiddleware) -> Agent[DeepAgentDeps, Any]:
    middleware = ContextManagerMiddleware(summarization_model=None, messages_path=lambda ctx: ctx.deps.messages_path)
    return create_deep_agent(FunctionModel(two_rounds), context_manager=middleware, capabilities=[checkpoints])


def ids(messages: list[ModelMessage]) -> list[str | None]:
    return [get_message_id(m) for m in messages]


def checkpoint(n: int, *, auto: bool = True, name: str | None = None) -> Checkpoint:
    return Checkpoint(f"cp{n}", "s", name, f"m{n}", n, datetime(2026, 1, 1, tzinfo=UTC), auto)


async def test_a_checkpoint_per_turn_and_rewind(tmp_path: Path) -> None:
    checkpoints = CheckpointMiddleware()
    agent = agent_with(checkpoints)
    deps = DeepAgentDeps(base_dir=tmp_path, session_id="s")
    first = await agent.run("one", deps=deps)
    second = await agent.run("two", deps=deps, message_history=first.all_messages())

    store = FileCheckpointStore(tmp_path / "sessions" / "s")
    saved = store.list()
    assert [c.message_id for c in saved] == [ids(first.all_messages())[-1], ids(second.all_messages())[-1]]
    assert [c.message_count for c in saved] == [len(first.all_messages()), len(second.all_messages())]
    assert all(c.auto and c.name is None and c.session_id == "s" for c in saved)

    rewound = await checkpoints.rewind(saved[0].id)
    assert ids(rewound) == ids(first.all_messages())
    assert [m.parts for m in rewound] == [m.parts for m in first.all_messages()]
    assert validate_history(rewound, for_request=False) == []
    third = await agent.run(
        "again from one", deps=DeepAgentDeps(base_dir=tmp_path, session_id="s2"), message_history=rewound
    )
    assert third.output == "done"


async def test_a_checkpoint_per_round_of_tool_calls(tmp_path: Path) -> None:
    checkpoints = CheckpointMiddleware(every="tool_call")
    agent = agent_with(checkpoints)
    result = await agent.run("go", deps=DeepAgentDeps(base_dir=tmp_path, session_id="s"))
    messages = result.all_messages()
    saved = FileCheckpointStore(tmp_path / "sessions" / "s").list()
    # After round 1 (two parallel calls: one checkpoint), after round 2, and at the end of the turn.
    assert [c.message_id for c in saved] == [ids(messages)[2], ids(messages)[4], ids(messages)[-1]]
    for saved_checkpoint, length in zip(saved[:2], (3, 5), strict=True):
        rewound = await checkpoints.rewind(saved_checkpoint.id)
        assert ids(rewound) == ids(messages[:length])
        assert isinstance(rewound[-1], ModelRequest) and any(isinstance(p, ToolReturnPart) for p in rewound[-1].parts)
        assert validate_history(rewound) == [], "ready to send: the calls and their results together"


async def test_named_checkpoints_and_every_off(tmp_path: Path) -> None:
    checkpoints = CheckpointMiddleware(every="off")
    agent = agent_with(checkpoints)
    result = await agent.run("go", deps=DeepAgentDeps(base_dir=tmp_path, session_id="s"))
    session_dir = tmp_path / "sessions" / "s"
    assert not (session_dir / "checkpoints.json").exists()
    named = await checkpoints.checkpoint(result.all_messages(), name="before refactor")
    assert named.name == "before refactor" and not named.auto
    assert FileCheckpointStore(session_dir).get(named.id) == named
    assert ids(await checkpoints.rewind(named.id)) == ids(result.all_messages())
    waiting = result.all_messages()[:2]  # ends with the response whose tool calls are not answered yet
    with pytest.raises(ForkPointError, match="waiting for their results"):
        await checkpoints.checkpoint(waiting, name="mid-call")
    assert [c.name for c in FileCheckpointStore(session_dir).list()] == ["before refactor"]


async def test_automatic_checkpoints_are_pruned_named_ones_kept(tmp_path: Path) -> None:
    checkpoints = CheckpointMiddleware(keep=2)
    agent = agent_with(checkpoints)
    deps = DeepAgentDeps(base_dir=tmp_path, session_id="s")
    history: list[ModelMessage] = []
    ends: list[str | None] = []
    for n in range(4):
        result = await agent.run(f"turn {n}", deps=deps, message_history=history)
        history = result.all_messages()
        ends.append(ids(history)[-1])
        if n == 0:
            await checkpoints.checkpoint(history, name="first")
    saved = FileCheckpointStore(tmp_path / "sessions" / "s").list()
    assert [(c.name, c.message_id) for c in saved] == [("first", ends[0]), (None, ends[2]), (None, ends[3])]


def test_store_prune_delete_and_get(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path / "s")
    assert store.list() == [] and store.prune(1) == 0
    for n in range(5):
        store.save(checkpoint(n, auto=n != 1, name="keep me" if n == 1 else None))
    assert store.prune(2) == 2
    assert [c.id for c in store.list()] == ["cp1", "cp3", "cp4"]
    assert store.prune(2) == 0
    store.delete("cp1")
    assert [c.id for c in store.list()] == ["cp3", "cp4"]
    with pytest.raises(CheckpointNotFoundError, match="cp1"):
        store.get("cp1")
    with pytest.raises(CheckpointNotFoundError):
        store.delete("cp1")
    store.save(checkpoint(3, name="renamed"))
    assert store.get("cp3").name == "renamed" and len(store.list()) == 2


@pytest.mark.parametrize("bad", ["../evil", "..", "a/b", "", "nul\x00", "x" * 65, "../../etc/passwd"])
async def test_bad_checkpoint_ids_are_refused(tmp_path: Path, bad: str) -> None:
    checkpoints = CheckpointMiddleware(store=FileCheckpointStore(tmp_path / "s"))
    with pytest.raises(InvalidCheckpointIdError, match="invalid checkpoint id"):
        await checkpoints.rewind(bad)
    for call in (checkpoints.store.get, checkpoints.store.delete):  # type: ignore[union-attr]
        with pytest.raises(InvalidCheckpointIdError):
            call(bad)
    with pytest.raises(InvalidCheckpointIdError):
        FileCheckpointStore(tmp_path / "s").save(Checkpoint(bad, "s", None, None, 0, datetime.now(UTC), True))
    assert not (tmp_path / "s").exists()
    with pytest.raises(CheckpointNotFoundError):
        await checkpoints.rewind("unknown")


def test_a_crash_mid_write_leaves_the_previous_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileCheckpointStore(tmp_path / "s")
    store.save(checkpoint(1))
    before = store.path.read_bytes()

    def torn(handle: Any, data: bytes) -> None:
        handle.write(data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_store, "_write", torn)
    with pytest.raises(CheckpointError, match="previous checkpoints are intact"):
        store.save(checkpoint(2))
    assert store.path.read_bytes() == before
    assert [c.id for c in FileCheckpointStore(tmp_path / "s").list()] == ["cp1"]
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["checkpoints.json"], "no temporary file left"


def test_a_crash_between_the_renames_keeps_the_previous_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileCheckpointStore(tmp_path / "s")
    store.save(checkpoint(1))
    store.save(checkpoint(2))
    real_rename = os.rename
    calls: list[str] = []

    def crash_on_second(src: Any, dst: Any) -> None:
        calls.append(str(dst))
        if len(calls) == 2:
            raise OSError(5, "Input/output error")  # the current file is the backup now; the new one never lands
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", crash_on_second)
    with pytest.raises(CheckpointError, match="previous checkpoints are intact"):
        store.save(checkpoint(3))
    monkeypatch.setattr(os, "rename", real_rename)
    assert not store.path.exists()
    assert [c.id for c in FileCheckpointStore(tmp_path / "s").list()] == ["cp1", "cp2"]
    store.save(checkpoint(4))
    assert [c.id for c in FileCheckpointStore(tmp_path / "s").list()] == ["cp1", "cp2", "cp4"]
    store.path.write_text("{torn")  # a damaged file (power loss without fsync): the previous version is read
    assert [c.id for c in store.list()] == ["cp1", "cp2"]


async def test_a_damaged_checkpoints_file_is_reported_and_never_overwritten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session_dir = tmp_path / "sessions" / "s"
    session_dir.mkdir(parents=True)
    (session_dir / "checkpoints.json").write_text('{"format": 1, "checkpoints": [{"id": "cut')
    with pytest.raises(CheckpointError, match="damaged"):
        FileCheckpointStore(session_dir).list()
    with caplog.at_level(logging.WARNING, logger="pydantic_deep.checkpoints"):
        result = await agent_with(CheckpointMiddleware()).run(
            "go", deps=DeepAgentDeps(base_dir=tmp_path, session_id="s")
        )
    assert result.output == "done", "a checkpoint that cannot be written does not fail the run"
    assert "automatic checkpoint skipped" in caplog.text
    assert (session_dir / "checkpoints.json").read_text() == '{"format": 1, "checkpoints": [{"id": "cut'


async def test_without_a_session_on_disk_there_are_no_checkpoints(tmp_path: Path) -> None:
    checkpoints = CheckpointMiddleware()
    result = await agent_with(checkpoints).run("go", deps=DeepAgentDeps(base_dir=None))
    assert result.output == "done"
    with pytest.raises(CheckpointError, match="no checkpoint store"):
        await checkpoints.checkpoint(result.all_messages())


async def test_checkpoints_are_pointers_not_copies(tmp_path: Path) -> None:
    """The file holds ids, not messages: its size does not grow with the history."""
    checkpoints = CheckpointMiddleware(every="off")
    agent = agent_with(checkpoints)
    deps = DeepAgentDeps(base_dir=tmp_path, session_id="s")
    short = await agent.run("go", deps=deps)
    await checkpoints.checkpoint(short.all_messages(), name="n")
    size_short = (tmp_path / "sessions" / "s" / "checkpoints.json").stat().st_size
    history = short.all_messages()
    for n in range(20):
        history = (await agent.run(f"turn {n} " + "x" * 1_000, deps=deps, message_history=history)).all_messages()
    store = FileCheckpointStore(tmp_path / "sessions" / "s")
    for c in store.list():
        store.delete(c.id)
    await checkpoints.checkpoint(history, name="n")
    size_long = store.path.stat().st_size
    assert len(history) > 100
    assert abs(size_long - size_short) <= 4, "only the message count's digits differ"
    assert "x" * 100 not in store.path.read_text()


async def test_rewind_across_a_compaction(tmp_path: Path) -> None:
    checkpoints = CheckpointMiddleware()
    agent = agent_with(checkpoints)
    deps = DeepAgentDeps(base_dir=tmp_path, session_id="s")
    first = await agent.run("one", deps=deps)
    assert deps.context_manager is not None
    deps.context_manager.request_compact()
    second = await agent.run("two", deps=deps, message_history=first.all_messages())
    assert any(is_summary_message(m) for m in second.all_messages())
    before, after = FileCheckpointStore(tmp_path / "sessions" / "s").list()

    at_first = await checkpoints.rewind(before.id)
    assert ids(at_first) == ids(first.all_messages()), "before the compaction: the originals, not the summary"
    at_second = await checkpoints.rewind(after.id)
    assert ids(at_second) == ids(second.all_messages()), "after it: the working context, summary included"
    for rewound in (at_first, at_second):
        assert validate_history(rewound, for_request=False) == []


async def test_session_manager_rewind_forks_at_the_checkpoint(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path)
    info = sessions.create("s")
    checkpoints = CheckpointMiddleware()
    agent = agent_with(checkpoints)
    first = await agent.run("one", deps=sessions.deps(info.id))
    await agent.run("two", deps=sessions.deps(info.id), message_history=first.all_messages())
    earliest = FileCheckpointStore(info.path).list()[0]

    branch = await sessions.rewind(info.id, earliest.id, new_id="branch")
    assert branch.forked_from == f"s@{earliest.message_id}"
    assert (
        ids(await sessions.resume(branch.id)) == ids(first.all_messages()) == ids(await checkpoints.rewind(earliest.id))
    )
    assert sessions.get(info.id).message_count > branch.message_count
    with pytest.raises(InvalidCheckpointIdError):
        await sessions.rewind(info.id, "../evil")
    assert json.loads((info.path / "session.json").read_text())["id"] == "s"
