"""A package's import graph read from its source (ast), and its cycles.

One reading for tests/test_architecture.py (the layering rules) and
benchmarks/import_cycles.py (cycle counts of any checkout, which it never imports).
Importing ``a.b.c`` is an edge to ``a.b.c`` only, not to the packages ``a`` and ``a.b``,
so a package's ``__init__`` re-exporting its modules is no cycle.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

Graph = dict[str, set[str]]


def module_names(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module under the package directory."""
    root = package.resolve()
    out: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


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


def imports_of(name: str, modules: dict[str, Path], *, typing_too: bool = True) -> set[str]:
    """The modules of ``modules`` that ``name`` imports: module-level and function-local,
    and those under ``if TYPE_CHECKING:`` unless ``typing_too`` is False."""
    path = modules[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), typing_too):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        out.update(t for t in targets if t in modules and t != name)
    return out


def graph_of(modules: dict[str, Path], *, typing_too: bool = True) -> Graph:
    return {name: imports_of(name, modules, typing_too=typing_too) for name in modules}


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (each a cycle or
    several), sorted; a module importing itself is one too."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan
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
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)
