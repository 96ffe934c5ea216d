"""`pydantic-deep migrate`: file -> SQLite -> file loses nothing (records, versions, summaries, search texts,
checkpoints, memories); `--store` reads sessions from a database."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from pydantic_deep.checkpoints import Checkpoint, FileCheckpointStore
from pydantic_deep.cli import main as run
from pydantic_deep.storage import StorageError, migrate, open_storage
from summarization_pydantic_ai import get_message_id
from summarization_pydantic_ai.store import JsonHistoryDatabase

from .helpers import dumped, edited, summary, turns


async def _file_layout(base: Path) -> None:
    history = JsonHistoryDatabase(base / "sessions")
    messages = turns(10)
    store = history.session("alpha")
    await store.append(messages)
    await store.append([edited(messages[3], "a second version")])
    await store.append([summary(messages[:8], before=[], after=messages[8:]), *turns(2, start=10)])
    message_id = get_message_id(messages[5])
    assert message_id is not None
    await store.add_search_text(message_id, "evicted output: kumquat inventory")
    await history.session("beta").append(turns(4, topic="pears"))
    checkpoint = Checkpoint("cp1", "alpha", "before refactor", message_id, 6, datetime(2026, 1, 2, tzinfo=UTC), False)
    FileCheckpointStore(base / "sessions" / "alpha").save(checkpoint)
    (base / "main").mkdir()
    (base / "main" / "MEMORY.md").write_text("# Notes\n- prefers tabs\n", encoding="utf-8")
    await history.close()


def test_file_to_sqlite_to_file_is_lossless(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import anyio

    anyio.run(_file_layout, tmp_path / "a")
    source, database, back = (tmp_path / "a").as_uri(), f"sqlite:///{tmp_path / 'db.sqlite'}", (tmp_path / "b").as_uri()
    assert run(["migrate", "--from", source, "--to", database]) == 0
    assert "2 sessions (18 records copied" in capsys.readouterr().out
    assert run(["migrate", "--from", database, "--to", back]) == 0
    for name in ("alpha", "beta"):  # byte for byte: every record, version and summary, in order
        original = (tmp_path / "a" / "sessions" / name / "messages.json").read_bytes()
        assert (tmp_path / "b" / "sessions" / name / "messages.json").read_bytes() == original
    assert (tmp_path / "b" / "main" / "MEMORY.md").read_text() == "# Notes\n- prefers tabs\n"
    assert (
        FileCheckpointStore(tmp_path / "b" / "sessions" / "alpha").list()
        == FileCheckpointStore(tmp_path / "a" / "sessions" / "alpha").list()
    )
    assert (tmp_path / "b" / "sessions" / "alpha" / "messages.json.search-text.json").is_file()
    # Again: nothing new to copy.
    assert run(["migrate", "--from", source, "--to", database]) == 0
    assert "(0 records copied, 18 already there)" in capsys.readouterr().out
    # The database serves the read commands.
    assert run(["sessions", "--store", database]) == 0
    assert "alpha" in capsys.readouterr().out
    assert run(["search", "alpha", "kumquat", "--store", database]) == 0
    assert "kumquat" in capsys.readouterr().out
    assert run(["show", "beta", "--store", database]) == 0
    assert "pears" in capsys.readouterr().out
    assert run(["show", "nope", "--store", database]) != 0
    assert "no session 'nope'" in capsys.readouterr().err


async def test_migrate_refuses_a_different_memory(tmp_path: Path) -> None:
    source, target = open_storage(tmp_path / "a"), open_storage(f"sqlite:///{tmp_path / 'db.sqlite'}")
    await source.history.session("s").append(turns(2))
    assert await source.memory.compare_and_swap("main", None, "mine")
    assert await target.memory.compare_and_swap("main", None, "theirs")
    with pytest.raises(StorageError, match="other content"):
        await migrate(source, target)
    await source.close()
    await target.close()


def test_bad_store_urls_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["sessions", "--store", "mysql://me:s3cret@host/db"]) != 0
    err = capsys.readouterr().err
    assert "unknown store URL scheme" in err
    assert "s3cret" not in err
    assert len(err.strip().splitlines()) == 1


def test_history_records_match_after_migration(tmp_path: Path) -> None:
    import anyio

    async def check() -> None:
        await _file_layout(tmp_path / "a")
        report = await migrate(tmp_path / "a", f"sqlite:///{tmp_path / 'db.sqlite'}")
        assert report.checkpoints == {"alpha": 1, "beta": 0}
        assert report.memories == ["main"]
        source, target = open_storage(tmp_path / "a"), open_storage(f"sqlite:///{tmp_path / 'db.sqlite'}")
        for name in ("alpha", "beta"):
            a, b = source.history.session(name), target.history.session(name)
            assert dumped(await a.load_versions()) == dumped(await b.load_versions())
            assert dumped(await a.load()) == dumped(await b.load())
        assert target.checkpoints("alpha").list() == source.checkpoints("alpha").list()
        await source.close()
        await target.close()

    anyio.run(check)


def test_report_reads_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    anyio.run(_file_layout, tmp_path / "a")
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    assert run(["migrate", "--from", (tmp_path / "a").as_uri(), "--to", database]) == 0
    capsys.readouterr()
    out = tmp_path / "alpha.html"
    assert run(["report", "alpha", "--store", database, "--out", str(out)]) == 0
    assert "<svg" in out.read_text(encoding="utf-8")
    assert run(["report", "nope", "--store", database, "--out", str(tmp_path / "nope.html")]) != 0
    assert not (tmp_path / "nope.html").exists()


def test_session_metadata_travels_with_the_sessions(tmp_path: Path) -> None:
    """A fork's origin and a session's creation time (session.json in files, a row in a database) are migrated."""
    import anyio

    from pydantic_deep import SessionManager

    anyio.run(_file_layout, tmp_path / "a")
    files = SessionManager(tmp_path / "a")
    fork = anyio.run(lambda: files.fork("alpha", new_id="alpha-copy"))
    database, back = f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "b"
    anyio.run(migrate, (tmp_path / "a").as_uri(), database)
    anyio.run(migrate, database, back.as_uri())
    for manager in (SessionManager(tmp_path / "elsewhere", store=database), SessionManager(back)):
        copied = manager.get("alpha-copy")
        assert (copied.forked_from, copied.created) == (fork.forked_from, fork.created)
        assert copied.message_count == fork.message_count
