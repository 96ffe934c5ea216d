"""Import cycles among the modules of our packages (`summarization_pydantic_ai`, `pydantic_deep`).

Every import counts, wherever it is (module level, inside a function, under `if TYPE_CHECKING:`), except that
`--runtime` leaves the `TYPE_CHECKING` ones out. A cycle is a strongly connected component of the import graph:
modules that reach each other through imports. Each is printed with one shortest circle through it.

    python scripts/import_cycles.py            # exit status 1 when there is a cycle
    python scripts/import_cycles.py --runtime  # the cycles Python meets when it imports

An import of a package (`from ..backends import X`) is an edge to its `__init__`; `from . import name` is an edge to
the submodule `name` when there is one, else to the package.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("summarization_pydantic_ai", "pydantic_deep")


def module_names(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> file, for every module of our packages (`pkg.sub` for `pkg/sub/__init__.py`)."""
    names: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, runtime: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and runtime and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(runtime: bool = False, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports."""
    names = module_names(root)
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), runtime):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                target = _absolute(name, is_package, node)
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in names else target for a in node.names]
            for imported in targets:
                target = imported
                while target and target not in names:  # `import a.b.c` of ours: the deepest module we have
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def shortest_circle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One shortest circle through the component's first module (breadth-first inside the component)."""
    members = set(component)
    start = component[0]
    parents: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node] & members):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                return [*reversed(path), start]
            if child not in parents:
                parents[child] = node
                queue.append(child)
    return component  # pragma: no cover - a component always has a circle through each member


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", action="store_true", help="leave out imports under `if TYPE_CHECKING:`")
    args = parser.parse_args(argv)
    graph = import_graph(runtime=args.runtime)
    found = cycles(graph)
    for component in found:
        print(f"{len(component)} modules: {', '.join(component)}")
        print("  " + " -> ".join(shortest_circle(graph, component)))
    print(f"{len(found)} import cycle(s) among {len(graph)} modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
