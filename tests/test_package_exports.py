"""The package's top level: `PostgresHistoryStore` and `write_session_report` are importable from it like the other
stores and reports, on first use only (importing the package needs neither psycopg nor the report's modules)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import summarization_pydantic_ai
from summarization_pydantic_ai import report, store

_LAZY = {
    "PostgresHistoryStore": store,
    "PostgresHistoryDatabase": store,
    "write_session_report": report,
    "write_session_report_async": report,
}


def test_the_lazy_names_are_public_and_the_same_objects_as_in_their_packages() -> None:
    from summarization_pydantic_ai import PostgresHistoryStore, write_session_report

    assert PostgresHistoryStore is store.PostgresHistoryStore
    assert write_session_report is report.write_session_report
    for name, package in _LAZY.items():
        assert name in summarization_pydantic_ai.__all__ and name in dir(summarization_pydantic_ai)
        assert getattr(summarization_pydantic_ai, name) is getattr(package, name)
    namespace: dict[str, object] = {}
    exec("from summarization_pydantic_ai import *", namespace)
    assert namespace["PostgresHistoryStore"] is store.PostgresHistoryStore
    with pytest.raises(AttributeError, match="has no attribute 'PostgresHistoryStor'"):
        summarization_pydantic_ai.PostgresHistoryStor  # type: ignore[attr-defined]


def test_importing_the_package_imports_neither_psycopg_nor_the_report() -> None:
    script = textwrap.dedent(
        """
        import sys
        import summarization_pydantic_ai
        assert "psycopg" not in sys.modules, "psycopg imported"
        assert "summarization_pydantic_ai.report" not in sys.modules, "report imported"
        from summarization_pydantic_ai import PostgresHistoryStore, write_session_report
        assert "psycopg" in sys.modules and "summarization_pydantic_ai.report" in sys.modules
        print(PostgresHistoryStore.__name__, write_session_report.__name__)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["PostgresHistoryStore", "write_session_report"]


def test_without_psycopg_the_top_level_name_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n == "psycopg" or n.startswith(("psycopg.", "psycopg_pool"))]:
        monkeypatch.delitem(sys.modules, name)
    for name in [n for n in sys.modules if n.startswith("summarization_pydantic_ai.store._postgres")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(store, "_postgres", raising=False)  # or `from . import _postgres` finds it there
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'summarization-pydantic-ai\[postgres\]'"):
        from summarization_pydantic_ai import PostgresHistoryStore  # noqa: F401
