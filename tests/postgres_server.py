"""The PostgreSQL server the tests use: one throwaway cluster per test session (`scripts/pg_cluster.py`), or the
server named by `SPA_TEST_POSTGRES_DSN`; each test that asks for `postgres_dsn` gets a fresh database of its own.

Without server binaries the PostgreSQL tests are skipped, saying why; with `SPA_REQUIRE_POSTGRES=1` (set by
`.ci/run`) they fail instead, so CI never passes without having run them.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

REQUIRE_ENV = "SPA_REQUIRE_POSTGRES"
_TEMPLATE = "spa_test_template"  # one per test process (pytest-xdist workers may share a server)
_names = itertools.count()


def load_cluster_module() -> ModuleType:
    """`scripts/pg_cluster.py`, loaded by path (scripts/ is not a package and need not be on sys.path)."""
    name = "spa_pg_cluster"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[1] / "scripts" / "pg_cluster.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _unavailable(reason: str) -> None:
    message = f"PostgreSQL tests need a server: {reason}"
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{message} ({REQUIRE_ENV} is set, so this is a failure, not a skip)", pytrace=False)
    pytest.skip(message)


def with_database(dsn: str, database: str) -> str:
    """`dsn` (a `postgresql://` URL) pointing at another database of the same server."""
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, "/" + quote(database), parts.query, parts.fragment))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The DSN of a running server (its `postgres` database), started once per test session."""
    try:
        import psycopg
        from psycopg.sql import SQL
    except ImportError:
        _unavailable("psycopg is not installed (pip install -e '.[postgres]')")
        raise
    external = os.environ.get(load_cluster_module().DSN_ENV)
    cluster = None
    if external:
        dsn = external
    else:
        pg_cluster = load_cluster_module()
        cluster = pg_cluster.ThrowawayCluster()
        try:
            dsn = cluster.start()
        except pg_cluster.ClusterError as exc:
            _unavailable(f"no throwaway cluster could be started ({exc})")
            raise
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            # Each test's database is a cheap copy of this template (the stores need no extension).
            conn.execute(SQL("DROP DATABASE IF EXISTS {}").format(_template()))
            conn.execute(SQL("CREATE DATABASE {} TEMPLATE template0").format(_template()))
        yield dsn
    finally:
        if cluster is not None:
            cluster.stop()
        else:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(SQL("DROP DATABASE IF EXISTS {}").format(_template()))


@pytest.fixture
def postgres_dsn(postgres_server: str) -> Iterator[str]:
    """The DSN of an empty database made for this test (dropped afterwards)."""
    import psycopg
    from psycopg.sql import SQL, Identifier

    name = f"spa_test_{os.getpid()}_{next(_names)}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(SQL("CREATE DATABASE {} TEMPLATE {}").format(Identifier(name), _template()))
    try:
        yield with_database(postgres_server, name)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(Identifier(name)))


def _template_name() -> str:
    return f"{_TEMPLATE}_{os.getpid()}"


def _template() -> Any:
    from psycopg.sql import Identifier

    return Identifier(_template_name())
