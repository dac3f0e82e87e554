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
import json
from pathlib import Path

from kairox_core.testing.import_graph import Graph, cycles, graph_of, module_names


def build_graph(package: Path, typing_too: bool) -> Graph:
    """Module name -> the package's modules it imports (``from a import b`` resolved)."""
    return graph_of(module_names(package), typing_too=typing_too)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("package", type=Path, help="the package directory, e.g. kairox_core")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, object] = {}
    for label, typing_too in (("with_type_checking", True), ("runtime_only", False)):
        graph = build_graph(args.package, typing_too)
        found = sorted(cycles(graph), key=lambda c: (-len(c), c))
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
