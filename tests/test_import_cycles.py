"""No import cycle among our modules (every import counts: module level, inside functions, under TYPE_CHECKING).
A cycle is resolved by moving the shared piece down into a module both import, never by an import inside a
function. `python scripts/import_cycles.py` lists them with one circle each."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from script_loader import load_script


def _script() -> ModuleType:
    return load_script("scripts/import_cycles.py")


def test_no_import_cycles_among_our_modules() -> None:
    script = _script()
    graph = script.import_graph()
    assert len(graph) > 150  # both packages were read
    found = [" -> ".join(script.shortest_circle(graph, c)) for c in script.cycles(graph)]
    assert found == []


def test_the_finder_sees_a_cycle_through_a_local_import(tmp_path: Path) -> None:
    script = _script()
    package = tmp_path / "summarization_pydantic_ai"
    package.mkdir()
    (tmp_path / "pydantic_deep").mkdir()
    (package / "__init__.py").write_text("")
    (package / "_a.py").write_text("from ._b import g\n")
    (package / "_b.py").write_text("def g():\n    from ._a import f\n")
    (package / "_c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._a import f\n")
    graph = script.import_graph(root=tmp_path)
    assert script.cycles(graph) == [["summarization_pydantic_ai._a", "summarization_pydantic_ai._b"]]
    assert "summarization_pydantic_ai._a" in graph["summarization_pydantic_ai._c"]
    assert (
        "summarization_pydantic_ai._a"
        not in script.import_graph(runtime=True, root=tmp_path)["summarization_pydantic_ai._c"]
    )
