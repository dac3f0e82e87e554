"""The layers of docs/architecture.md, checked: no import cycle in kairox_core, and no
module importing a module of a higher layer.

The graph is built from the source (ast): module-level, function-local and
``if TYPE_CHECKING:`` imports alike. A type-only import still ties two modules together
(a rename or a move breaks both), so it counts. Importing ``a.b.c`` counts as an edge to
``a.b.c`` only (not to the packages ``a`` and ``a.b``, whose ``__init__`` Python runs too),
so a package's ``__init__`` re-exporting its modules is no cycle.

``python tests/test_architecture.py`` prints the graph, its cycles (strongly connected
components) and the layer violations; ``--dot`` prints it for Graphviz.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kairox_core.testing.import_graph import cycles, graph_of, module_names

PACKAGE = Path(__file__).resolve().parent.parent / "kairox_core"

# Top to bottom. A module belongs to the first layer with a prefix matching it (a prefix
# names a module and everything under it); it may import its own layer and those below.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "front ends",
        ("kairox_core", "kairox_core.__main__", "cli", "chat", "web", "mcp", "testing"),
    ),
    ("composition", ("facade",)),
    ("engines", ("compaction", "recall", "default_plugins", "longterm.engine")),
    ("session", ("session", "session_services", "turn", "toolloop", "sync_twins", "usage")),
    ("seams", ("engines", "engine_context", "results")),
    (
        "core",
        (
            "context",
            "memory",
            "longterm",
            "retrieval",
            "store",
            "providers",
            "prompt",
            "turn_status",
        ),
    ),
    # ``kairox_core.config`` (the package) re-exports the check of the names and options
    # plugins provide, which reads the registry
    ("configuration", ("config", "config.plugin_check")),
    ("registry", ("plugins", "plugin_options", "hookspecs")),
    (
        "protocols",
        (
            "memory.base",
            "memory.records",
            "retrieval.base",
            "retrieval.documents",
            "providers.base",
            "compaction.base",
            "store.base",
            "longterm.store",
        ),
    ),
    (
        # the configuration's sections and loader, named by the protocols (a new section
        # module is in "configuration", by the ``config`` prefix, until listed here)
        "settings",
        (
            "config.base",
            "config.compaction",
            "config.kairox",
            "config.loader",
            "config.longterm",
            "config.memory",
            "config.model",
            "config.profiles",
            "config.recall",
            "config.retrieval",
            "config.sources",
            "config.tools",
        ),
    ),
    (
        "base",
        (
            "errors",
            "events",
            "tokens",
            "usecache",
            "markers",
            "inputs",
            "sync",
            "redaction",
            "validation",
            "textfold",
            "summary_lines",
            "attachments",
            "capabilities",
        ),
    ),
)
# a more specific prefix wins over a shorter one (``memory.base`` is a protocol, the rest
# of ``memory`` is core)


MODULES = module_names(PACKAGE)


GRAPH = graph_of(MODULES)


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of the module's layer (the longest matching prefix)."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for number, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            full = prefix if prefix.startswith("kairox_core") else f"kairox_core.{prefix}"
            inside = module.startswith(full + ".") and full != "kairox_core"  # the root: itself
            if (module == full or inside) and (best is None or len(full) > best[0]):
                best = (len(full), number)
    if best is None:
        raise LookupError(f"{module} is in no layer of tests/test_architecture.py: add it")
    return best[1]


def violations(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where the imported module is in a higher layer."""
    return sorted(
        (m, t) for m, targets in graph.items() for t in targets if layer_of(t) < layer_of(m)
    )


# --- the rules ---------------------------------------------------------------------------


def test_the_graph_sees_function_local_and_type_only_imports() -> None:
    assert "kairox_core.facade" in GRAPH["kairox_core"]  # inside __getattr__
    assert "kairox_core.plugins" in GRAPH["kairox_core.facade"]  # inside a method
    # only under TYPE_CHECKING:
    assert "kairox_core.engine_context" in GRAPH["kairox_core.recall.engine"]


def test_cycles_finds_each_kind() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_a_seeded_type_only_cycle_fails(tmp_path: Path) -> None:
    """The rule catches what the issue found: a cycle made only of TYPE_CHECKING imports."""
    pkg = tmp_path / "kairox_core"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kairox_core.high import H\n"
    )
    (pkg / "high.py").write_text("from kairox_core.low import *\nclass H: ...\n")
    modules = module_names(pkg)
    assert cycles(graph_of(modules)) == [["kairox_core.high", "kairox_core.low"]]


def test_no_import_cycle_of_any_kind_in_kairox_core() -> None:
    found = cycles(GRAPH)
    assert not found, "import cycles (type-only imports counted): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_layers_seed_a_violation() -> None:
    graph = {"kairox_core.session": set(), "kairox_core.engines": {"kairox_core.session"}}
    assert violations(graph) == [("kairox_core.engines", "kairox_core.session")]


def test_no_lower_layer_imports_a_higher_one() -> None:
    wrong = violations(GRAPH)
    assert not wrong, "lower layer imports a higher one: " + "; ".join(
        f"{m} ({LAYERS[layer_of(m)][0]}) -> {t} ({LAYERS[layer_of(t)][0]})" for m, t in wrong
    )


def test_nothing_below_the_facade_names_it() -> None:
    facade = layer_of("kairox_core.facade")
    below = [m for m in GRAPH if layer_of(m) > facade and "kairox_core.facade" in GRAPH[m]]
    assert not below, below


def test_the_core_imports_no_engine_module() -> None:
    engines = layer_of("kairox_core.compaction")
    wrong = {
        m: sorted(t for t in GRAPH[m] if layer_of(t) == engines)
        for m in GRAPH
        if layer_of(m) > engines and any(layer_of(t) == engines for t in GRAPH[m])
    }
    assert not wrong, f"core modules import engine modules: {wrong}"


@pytest.mark.slow  # one interpreter per module
def test_each_module_below_the_front_ends_imports_first() -> None:
    """What the graph cannot see: a package's ``__init__`` runs on any import under it,
    so a low module importing ``pkg.x`` can re-enter itself through ``pkg/__init__``.
    Imported first, alone, each module must load."""
    front = layer_of("kairox_core.cli")
    failed = []
    for module in sorted(m for m in MODULES if layer_of(m) != front):
        done = subprocess.run(
            [sys.executable, "-c", f"import {module}"], capture_output=True, text=True
        )
        if done.returncode:
            failed.append(f"{module}: {done.stderr.strip().splitlines()[-1]}")
    assert not failed, failed


def main(argv: list[str]) -> int:
    if "--dot" in argv:
        print("digraph kairox_core {")
        for m in sorted(GRAPH):
            for t in sorted(GRAPH[m]):
                print(f'  "{m}" -> "{t}";')
        print("}")
        return 0
    for m in sorted(GRAPH):
        print(f"{m} [{LAYERS[layer_of(m)][0]}] -> {', '.join(sorted(GRAPH[m])) or '-'}")
    found = cycles(GRAPH)
    print(f"\ncycles: {len(found)}")
    for c in found:
        print("  " + " <-> ".join(c))
    wrong = violations(GRAPH)
    print(f"layer violations: {len(wrong)}")
    for m, t in wrong:
        print(f"  {m} -> {t}")
    return 1 if found or wrong else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
