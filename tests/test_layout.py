"""The package's layout and import graph say what depends on what (issue 23).

Every `import` of a leafsearch module counts, at module level, inside a function, or under
`TYPE_CHECKING`: a type import is a dependency a reader has to follow too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "leafsearch"

#: The package root: entry points and what every layer shares, nothing else.
ROOT_MODULES = {"__init__", "__main__", "cli", "client", "testing", "errors", "unsupported", "version"}

#: The layers above the node, which may call it: HTTP, the command line and its tools, the
#: in-process client, and the package's own lazy `leafsearch.Node`.
ABOVE_NODE = ("leafsearch.rest", "leafsearch.cli", "leafsearch.client", "leafsearch.transfer")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _ours(module: str | None) -> bool:
    return module is not None and (module == "leafsearch" or module.startswith("leafsearch."))


def _import_graph() -> dict[str, set[str]]:
    """Each leafsearch module and the leafsearch modules it imports (a `from package import name`
    of a submodule counts as that submodule)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}

    def owner(name: str) -> str:
        while name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {owner(a.name) for a in node.names if a.name.startswith("leafsearch.")}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else owner(str(node.module)))
        graph[name] = found - {name, "leafsearch"}
    return graph


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return _import_graph()


def test_the_package_root_holds_only_entry_points_and_shared_modules() -> None:
    loose = {path.stem for path in PACKAGE.glob("*.py")}
    assert loose == ROOT_MODULES


def test_every_package_says_what_it_holds() -> None:
    for folder in PACKAGE.rglob("*/"):
        if folder.name == "__pycache__" or not any(folder.glob("*.py")):
            continue
        init = folder / "__init__.py"
        assert init.exists(), folder
        if folder.parent == PACKAGE:
            assert ast.get_docstring(ast.parse(init.read_text())), f"{init} has no docstring"


def test_no_module_below_the_node_imports_it(graph: dict[str, set[str]]) -> None:
    below = {
        module
        for module in graph
        if module != "leafsearch"
        and not module.startswith("leafsearch.node")
        and not module.startswith(ABOVE_NODE)
    }
    offenders = {
        module: sorted(d for d in graph[module] if d.startswith("leafsearch.node"))
        for module in sorted(below)
        if any(d.startswith("leafsearch.node") for d in graph[module])
    }
    assert offenders == {}


def test_no_import_cycle_crosses_packages(graph: dict[str, set[str]]) -> None:
    crossing = [cycle for cycle in _cycles(graph) if len({_package(m) for m in cycle}) > 1]
    assert crossing == []


def test_the_graph_reader_finds_a_cycle_that_crosses_packages() -> None:
    """The check above can fail: a planted cycle across two packages is reported."""
    planted = {
        "leafsearch.search.a": {"leafsearch.index.b"},
        "leafsearch.index.b": {"leafsearch.search.a"},
        "leafsearch.index.c": set(),
    }
    assert _cycles(planted) == [["leafsearch.index.b", "leafsearch.search.a"]]
