"""The throwaway cluster the PostgreSQL tests run on: started once, one empty database per test, removed after."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from postgres_server import load_cluster_module


def test_each_test_gets_an_empty_utf8_database(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
        encoding = conn.execute("SHOW server_encoding").fetchone()
    assert tables == (0,)
    assert encoding == ("UTF8",)


def test_databases_of_two_tests_are_separate(postgres_dsn: str, postgres_server: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE mine (x int)")
        name = conn.execute("SELECT current_database()").fetchone()
    with psycopg.connect(postgres_server) as conn:
        assert conn.execute("SELECT current_database()").fetchone() != name
        assert conn.execute("SELECT to_regclass('public.mine')").fetchone() == (None,)


@pytest.mark.slow
def test_a_cluster_runs_on_loopback_and_stopping_removes_every_file() -> None:
    pg_cluster = load_cluster_module()
    cluster = pg_cluster.ThrowawayCluster()
    try:
        dsn = cluster.start()
    except pg_cluster.ClusterError as exc:
        if os.environ.get("SPA_REQUIRE_POSTGRES"):
            raise
        pytest.skip(f"no PostgreSQL server binaries: {exc}")
    directory = cluster.directory
    assert directory is not None and (directory / "data" / "PG_VERSION").exists()
    assert "@127.0.0.1:" in dsn
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    cluster.stop()
    assert not Path(directory).exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=2)


@pytest.mark.slow
def test_a_cluster_whose_owner_is_killed_is_stopped_and_removed() -> None:
    scripts = Path(__file__).resolve().parents[2] / "scripts"
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sys, time; sys.path.insert(0, {str(scripts)!r}); from pg_cluster import ThrowawayCluster; "
            "c = ThrowawayCluster(); c.start(); print(c.directory, flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    line = owner.stdout.readline().strip()
    if not line:
        owner.wait(10)
        pytest.skip("no PostgreSQL server binaries here")
    directory = Path(line)
    assert (directory / "data" / "postmaster.pid").exists()
    owner.kill()  # SIGKILL: no teardown runs in the owner
    owner.wait(10)
    deadline = time.monotonic() + 30
    while directory.exists():
        assert time.monotonic() < deadline, "the watchdog did not remove the cluster of a dead owner"
        time.sleep(0.2)
