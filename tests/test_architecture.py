"""The layers: no import cycle in kairox_core, and the core imports no engine by name.

The graph is built from the source (ast), module-level and function-local imports
alike, so a cycle hidden in a function body counts. Imports under ``if TYPE_CHECKING:``
are left out: they never run (they exist for annotations only).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import kairox_core

PACKAGE = Path(kairox_core.__file__).resolve().parent
CORE = ("facade", "session", "context", "memory", "store", "retrieval", "engines")
ENGINES = ("kairox_core.compaction", "kairox_core.recall", "kairox_core.default_plugins")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                yield from _runtime_imports(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _runtime_imports(node)


def imports_of(name: str) -> set[str]:
    """The kairox_core modules ``name`` imports at run time (submodules resolved)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        out.update(t for t in targets if t in MODULES and t != name)
    return out


GRAPH = {name: imports_of(name) for name in MODULES}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_graph_sees_function_local_imports() -> None:
    assert "kairox_core.facade" in GRAPH["kairox_core"]  # inside __getattr__
    assert "kairox_core.plugins" in GRAPH["kairox_core.facade"]  # inside a method


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_kairox_core() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_core_imports_no_engine_module() -> None:
    core = [
        m
        for m in MODULES
        if any(m == f"kairox_core.{c}" or m.startswith(f"kairox_core.{c}.") for c in CORE)
    ]
    assert "kairox_core.session" in core and "kairox_core.context.assembler" in core
    wrong = {
        m: sorted(t for t in GRAPH[m] if t.startswith(ENGINES))
        for m in core
        if any(t.startswith(ENGINES) for t in GRAPH[m])
    }
    assert not wrong, f"core modules import engine modules: {wrong}"
