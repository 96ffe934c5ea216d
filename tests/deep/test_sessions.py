"""SessionManager: create, list, get, resume, fork, delete — end to end through `create_deep_agent` + `Agent.run`."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_deep import (
    CorruptSessionError,
    DeepAgentDeps,
    ForkPointError,
    MessageNotFoundError,
    SessionExistsError,
    SessionInUseError,
    SessionManager,
    SessionNotFoundError,
    create_deep_agent,
)
from pydantic_deep.eviction import EvictionProcessor
from summarization_pydantic_ai import (
    ContextManagerMiddleware,
    InvalidSessionIdError,
    JsonHistoryStore,
    get_message_id,
    is_summary_message,
    validate_history,
)


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Each turn: one `write_file` call, then a text answer naming the prompt."""
    last = messages[-1]
    if any(isinstance(p, ToolReturnPart) for p in last.parts):
        return ModelResponse(parts=[TextPart("done")])
    prompt = next((str(p.content) for p in last.parts if isinstance(p, UserPromptPart)), "")
    return ModelResponse(parts=[ToolCallPart("write_file", {"path": f"/{len(messages)}.txt", "content": prompt})])


def deep_agent(**kwargs: Any) -> Agent[DeepAgentDeps, Any]:
    middleware = ContextManagerMiddleware(summarization_model=None, messages_path=lambda ctx: ctx.deps.messages_path)
    return create_deep_agent(FunctionModel(scripted), context_manager=middleware, **kwargs)


def ids(messages: list[ModelMessage]) -> list[str | None]:
    return [get_message_id(m) for m in messages]


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes: to show that nothing on disk changed."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def test_create_run_list_resume_fork_delete(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path / ".pydantic-deep")
    info = sessions.create()
    assert info.message_count == 0 and info.first_prompt is None
    assert await sessions.resume(info.id) == []
    agent = deep_agent()
    first = await agent.run("write the plan", deps=sessions.deps(info.id))
    history = await sessions.resume(info.id)
    assert ids(history) == ids(first.all_messages())
    second = await agent.run("and the tests", deps=sessions.deps(info.id), message_history=history)

    listed = sessions.list()
    assert [s.id for s in listed] == [info.id]
    got = sessions.get(info.id)
    assert got.message_count == len(second.all_messages()) == 8
    assert got.first_prompt == "write the plan"
    assert got.size_bytes == got.messages_path.stat().st_size > 0
    assert got.compactions == 0 and got.error is None
    assert got.created <= got.last_active

    fork = await sessions.fork(info.id)
    assert fork.id != info.id and fork.forked_from == f"{info.id}@{ids(second.all_messages())[-1]}"
    assert ids(await sessions.resume(fork.id)) == ids(second.all_messages())
    resumed = await sessions.resume(fork.id)
    third = await agent.run("only in the fork", deps=sessions.deps(fork.id), message_history=resumed)
    assert sessions.get(fork.id).message_count == len(third.all_messages()) == 12
    assert sessions.get(info.id).message_count == 8, "the original is not changed by its fork"

    sessions.delete(info.id)
    assert [s.id for s in sessions.list()] == [fork.id]
    assert not (tmp_path / ".pydantic-deep" / "sessions" / info.id).exists()
    with pytest.raises(SessionNotFoundError, match=info.id):
        sessions.get(info.id)


async def test_sessions_written_without_the_manager_are_listed_and_resumable(tmp_path: Path) -> None:
    base = tmp_path / ".pydantic-deep"
    deep = deep_agent()
    by_deep_agent = await deep.run("from create_deep_agent", deps=DeepAgentDeps(base_dir=base, session_id="deep"))
    path = base / "sessions" / "plain" / "messages.json"
    plain = Agent(
        FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("hi")])),
        capabilities=[ContextManagerMiddleware(summarization_model=None, messages_path=path)],
    )
    by_middleware = await plain.run("from a plain Agent")

    sessions = SessionManager(base)
    listed = {s.id: s for s in sessions.list()}
    assert set(listed) == {"deep", "plain"}
    assert listed["plain"].first_prompt == "from a plain Agent" and listed["plain"].message_count == 2
    assert listed["deep"].first_prompt == "from create_deep_agent" and listed["deep"].message_count == 4
    assert ids(await sessions.resume("plain")) == ids(by_middleware.all_messages())
    history = await sessions.resume("deep")
    assert ids(history) == ids(by_deep_agent.all_messages())
    again = await deep.run("continue", deps=sessions.deps("deep"), message_history=history)
    assert sessions.get("deep").message_count == len(again.all_messages())


async def test_list_is_newest_first(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path)
    agent = deep_agent()
    for name, when in (("old", 1_000_000), ("new", 3_000_000), ("mid", 2_000_000)):
        sessions.create(name)
        await agent.run(name, deps=sessions.deps(name))
        os.utime(sessions.get(name).messages_path, (when, when))
    assert [s.id for s in sessions.list()] == ["new", "mid", "old"]


async def compacted_session(sessions: SessionManager) -> tuple[str, list[ModelMessage], list[ModelMessage]]:
    """A session with two turns, a forced compaction, and a third turn: (id, first turn, final history)."""
    info = sessions.create("compacted")
    agent = deep_agent()
    deps = sessions.deps(info.id)
    first = await agent.run("first task", deps=deps)
    second = await agent.run("second task", deps=deps, message_history=first.all_messages())
    assert deps.context_manager is not None
    deps.context_manager.request_compact()
    third = await agent.run("third task", deps=deps, message_history=second.all_messages())
    assert any(is_summary_message(m) for m in third.all_messages())
    return info.id, first.all_messages(), third.all_messages()


async def test_fork_before_a_compaction_has_the_original_messages(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path)
    session_id, first, final = await compacted_session(sessions)
    assert sessions.get(session_id).compactions == 1
    point = ids(first)[-1]
    assert point not in ids(final), "the point was summarized away in the working context"

    fork = await sessions.fork(session_id, at_message_id=point, new_id="before")
    forked = await sessions.resume(fork.id)
    assert ids(forked) == ids(first)
    assert [m.parts for m in forked] == [m.parts for m in first], "the originals, verbatim"
    assert not any(is_summary_message(m) for m in forked)
    assert fork.compactions == 0 and fork.message_count == len(first)
    assert validate_history(forked, for_request=False) == []

    after = await sessions.fork(session_id, new_id="after")  # the end: the working context, summary included
    assert ids(await sessions.resume(after.id)) == ids(await sessions.resume(session_id))
    assert ids(await sessions.history_until(session_id, point)) == ids(first)


async def test_fork_copies_evicted_outputs(tmp_path: Path) -> None:
    def big(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("read it")])
        return ModelResponse(parts=[ToolCallPart("report", {})])

    middleware = ContextManagerMiddleware(summarization_model=None, messages_path=lambda ctx: ctx.deps.messages_path)
    agent = create_deep_agent(
        FunctionModel(big), context_manager=middleware, eviction=EvictionProcessor(token_limit=1_000)
    )
    lines = [f"line {i}: {'x' * 60}" for i in range(2_000)]
    lines[1_000] = "line 1000: a zebra"  # the middle of the output: not in its preview (head and tail)
    agent.tool_plain(lambda: "\n".join(lines), name="report")
    sessions = SessionManager(tmp_path)
    source = sessions.create("source")
    source_deps = sessions.deps(source.id)
    await agent.run("report", deps=source_deps)
    evicted = [f.path for f in await source_deps.backend.ls("/large_tool_results")]
    assert evicted

    fork = await sessions.fork(source.id)
    fork_deps = sessions.deps(fork.id)
    for path in evicted:
        assert await fork_deps.backend.read(path) == await source_deps.backend.read(path)
    # The full text of the evicted output is searchable in the fork at once, not only after its next run.
    store = JsonHistoryStore.open(fork.messages_path)
    try:
        hits = await store.search("zebra")
        assert len(hits) == 1 and all("zebra" not in str(m.parts) for m in await store.load_all())
    finally:
        store.close()
    sessions.delete(source.id)
    assert await fork_deps.backend.read(evicted[0]), "the fork's copy outlives the original"


async def test_deps_with_a_workspace_work_in_that_directory(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path / "state")
    info = sessions.create("ws")
    (tmp_path / "work").mkdir()
    await deep_agent().run("hello", deps=sessions.deps(info.id, workspace=tmp_path / "work"))
    assert [p.name for p in (tmp_path / "work").iterdir()] == ["1.txt"]
    assert (tmp_path / "work" / "1.txt").read_text() == "hello"
    assert sessions.get(info.id).message_count == 4


BAD_IDS = ["../evil", "a/b", "..", ".", "", "nul\x00byte", "x" * 300]


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_bad_session_ids_are_refused_and_nothing_is_written(tmp_path: Path, bad: str) -> None:
    base = tmp_path / "base"
    sessions = SessionManager(base)
    for call in (sessions.create, sessions.get, sessions.deps, sessions.delete):
        with pytest.raises(InvalidSessionIdError, match="invalid session id"):
            call(bad)
    with pytest.raises(InvalidSessionIdError):
        await sessions.resume(bad)
    with pytest.raises(InvalidSessionIdError):
        await sessions.history_until(bad, None)
    with pytest.raises(InvalidSessionIdError):
        await sessions.fork(bad)
    sessions.create("good")
    with pytest.raises(InvalidSessionIdError):
        await sessions.fork("good", new_id=bad)
    assert sorted(p.name for p in (base / "sessions").iterdir()) == ["good"]
    assert not (tmp_path / "evil").exists()


async def test_missing_session_is_a_clear_error(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path)
    (tmp_path / "sessions" / "empty-folder").mkdir(parents=True)  # neither messages.json nor session.json
    for session_id in ("nope", "empty-folder"):
        with pytest.raises(SessionNotFoundError, match=rf"no session '{session_id}' in {tmp_path}"):
            sessions.get(session_id)
        with pytest.raises(SessionNotFoundError):
            await sessions.resume(session_id)
        with pytest.raises(SessionNotFoundError):
            await sessions.fork(session_id)
        with pytest.raises(SessionNotFoundError):
            sessions.delete(session_id)
    assert sessions.list() == []
    assert tree(tmp_path) == {}


@pytest.mark.parametrize(
    "content",
    [
        b"garbage, not json at all\n" * 20,
        b'{"not": "an array"}\n' + b" " * 100,
        b"\x00" * 512,
        ModelMessagesTypeAdapter.dump_json([ModelRequest(parts=[UserPromptPart("hi")])], indent=2),  # foreign
    ],
    ids=["garbage", "object", "zeros", "indented-array"],
)
async def test_corrupt_session_is_listed_with_an_error_and_nothing_changes(tmp_path: Path, content: bytes) -> None:
    sessions = SessionManager(tmp_path)
    await deep_agent().run("fine", deps=DeepAgentDeps(base_dir=tmp_path, session_id="fine"))
    broken = tmp_path / "sessions" / "broken"
    broken.mkdir()
    (broken / "messages.json").write_bytes(content)
    before = tree(tmp_path)

    listed = {s.id: s for s in sessions.list()}
    assert listed["fine"].error is None
    assert listed["broken"].error is not None and "messages.json" in listed["broken"].error
    assert sessions.get("broken").error == listed["broken"].error
    with pytest.raises(CorruptSessionError, match=r"messages\.json"):
        await sessions.resume("broken")
    with pytest.raises(CorruptSessionError):
        await sessions.fork("broken", new_id="copy")
    with pytest.raises(CorruptSessionError):
        await sessions.history_until("broken", "some-id")
    assert tree(tmp_path) == before, "reading a corrupt session changes nothing on disk"


async def test_fork_at_an_unknown_message_creates_nothing(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path)
    info = sessions.create("s")
    await deep_agent().run("hello", deps=sessions.deps(info.id))
    before = tree(tmp_path)
    with pytest.raises(MessageNotFoundError, match="no message with id 'missing'"):
        await sessions.fork(info.id, at_message_id="missing", new_id="f")
    with pytest.raises(MessageNotFoundError):
        await sessions.history_until(info.id, "missing")
    assert tree(tmp_path) == before


async def test_fork_inside_a_tool_exchange_is_refused(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path)
    info = sessions.create("s")
    result = await deep_agent().run("hello", deps=sessions.deps(info.id))
    messages = result.all_messages()
    call = next(m for m in messages if isinstance(m, ModelResponse) and m.tool_calls)
    returns = messages[messages.index(call) + 1]
    with pytest.raises(ForkPointError, match=f"cut at '{get_message_id(returns)}'"):
        await sessions.fork(info.id, at_message_id=get_message_id(call), new_id="f")
    assert [s.id for s in sessions.list()] == ["s"]
    at_returns = await sessions.history_until(info.id, get_message_id(returns))
    assert isinstance(at_returns[-1], ModelRequest)
    assert validate_history(at_returns) == []


async def test_existing_ids_are_never_overwritten(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path)
    sessions.create("a")
    await deep_agent().run("hello", deps=sessions.deps("a"))
    before = tree(tmp_path)
    with pytest.raises(SessionExistsError, match="'a' exists already"):
        sessions.create("a")
    with pytest.raises(SessionExistsError):
        await sessions.fork("a", new_id="a")
    assert tree(tmp_path) == before


async def test_delete_is_refused_while_another_process_writes(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path)
    await deep_agent().run("hello", deps=DeepAgentDeps(base_dir=tmp_path, session_id="busy"))
    sessions.delete("busy")  # this process's writer is released first
    await deep_agent().run("hello", deps=DeepAgentDeps(base_dir=tmp_path, session_id="busy2"))
    path = sessions.get("busy2").messages_path
    JsonHistoryStore.open(path).close()  # this process lets go; the lock below stands for another process's writer
    with path.open("rb") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(SessionInUseError, match="open for writing"):
            sessions.delete("busy2")
    assert path.exists()
    sessions.delete("busy2")
    assert sessions.list() == []


async def test_a_damaged_record_is_skipped_and_the_file_left_alone(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path)
    info = sessions.create("s")
    result = await deep_agent().run("hello", deps=sessions.deps(info.id))
    JsonHistoryStore.open(info.messages_path).close()  # the run is over: another process will read the file
    lines = info.messages_path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"write_file"', b'"wrote_file"')  # the second message's checksum fails
    info.messages_path.write_bytes(b"\n".join(lines))
    before = tree(tmp_path)

    got = sessions.get("s")
    assert got.error is None and got.message_count == len(result.all_messages()) - 1
    resumed = await sessions.resume("s")
    assert ids(resumed) == [i for n, i in enumerate(ids(result.all_messages())) if n != 1]
    assert tree(tmp_path) == before, "reading never repairs: the next run that writes the session does"


async def test_listing_follows_appends_and_rewrites(tmp_path: Path) -> None:
    sessions = SessionManager(tmp_path)
    info = sessions.create("s")
    agent = deep_agent()
    first = await agent.run("one", deps=sessions.deps(info.id))
    assert sessions.get("s").message_count == 4
    await agent.run("two", deps=sessions.deps(info.id), message_history=first.all_messages())
    assert sessions.get("s").message_count == 8, "what was appended since the last listing is counted"
    sessions.delete("s")
    sessions.create("s")
    await agent.run("three", deps=sessions.deps("s"))
    assert (sessions.get("s").message_count, sessions.get("s").first_prompt) == (4, "three")
