"""Count the import circles in a package: strongly connected components of its import graph.

Read from the source (ast) of the package directory given, so any checkout can be
measured without importing it. Two graphs: every import (module-level, inside
functions and under ``if TYPE_CHECKING:``), and the run-time imports only (the
``TYPE_CHECKING`` blocks left out, as tests/test_architecture.py builds it). A circle
is a component of two modules or more, or a module importing itself.

    python benchmarks/import_cycles.py kairox_core [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Iterator
from pathlib import Path

Graph = dict[str, set[str]]


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, typing_too: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if not typing_too and isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                yield from _imports(child, typing_too)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node, typing_too)


def build_graph(package: Path, typing_too: bool) -> Graph:
    """Module name -> the package's modules it imports (``from a import b`` resolved)."""
    root = package.resolve()
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: Graph = {}
    for name, path in modules.items():
        anchor = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), typing_too):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    head = anchor.split(".")[: len(anchor.split(".")) - node.level + 1]
                    base = ".".join([*head, base] if base else head)
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            found.update(t for t in targets if t in modules and t != name)
        graph[name] = found
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of two modules or more (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(out, key=lambda c: (-len(c), c))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("package", type=Path, help="the package directory, e.g. kairox_core")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, object] = {}
    for label, typing_too in (("with_type_checking", True), ("runtime_only", False)):
        graph = build_graph(args.package, typing_too)
        found = cycles(graph)
        report[label] = {
            "modules": len(graph),
            "edges": sum(len(v) for v in graph.values()),
            "cycles": len(found),
            "modules_in_cycles": sum(len(c) for c in found),
            "components": found,
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for label, figures in report.items():
        assert isinstance(figures, dict)
        print(
            f"{label}: {figures['modules']} modules, {figures['edges']} edges, "
            f"{figures['cycles']} circles over {figures['modules_in_cycles']} modules"
        )
        for component in figures["components"]:
            print("   ", " <-> ".join(m.removeprefix("kairox_core.") for m in component))


if __name__ == "__main__":
    main()
