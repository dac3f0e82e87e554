"""The storage backend API: kairox-postgres imports only the core's public backend modules.

A backend written against the core's internals breaks whenever they move (the plugin
once imported 22 core modules, the SQLite backend's own among them). The list below is
the one docs/architecture.md ("The storage backend API") names; every import counts,
function-local and ``TYPE_CHECKING`` ones too.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BACKEND = ROOT / "plugins" / "kairox-postgres" / "src" / "kairox_postgres"
BACKEND_API = (
    "kairox_core",  # Kairox, hookimpl
    "kairox_core.errors",
    "kairox_core.events",
    "kairox_core.markers",
    "kairox_core.hookspecs",
    "kairox_core.cli",  # CliContext, pass_cli: a plugin's commands
    "kairox_core.store",  # SqliteStorage: the built-in backend, by name
    "kairox_core.store.protocol",  # the protocols and the values they pass
    "kairox_core.store.sql",  # the SQL stores over a Dialect
    "kairox_core.store.indexing",  # what a backend's own retrieval index is built from
)
TESTING = "kairox_core.testing"  # and its modules: contracts, fixtures


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def core_imports(source: str, filename: str) -> set[str]:
    """Every ``kairox_core`` module ``source`` imports, wherever the import sits (``from
    kairox_core.store import database`` counts as ``kairox_core.store.database``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "kairox_core")
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "kairox_core"
        ):
            module = str(node.module)
            for alias in node.names:
                inner = f"{module}.{alias.name}"
                found.add(inner if _is_module(inner) else module)
    return found


def outside_the_api(modules: set[str]) -> set[str]:
    return {
        m
        for m in modules
        if m not in BACKEND_API and m != TESTING and not m.startswith(TESTING + ".")
    }


def test_the_check_sees_every_kind_of_import() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import kairox_core.store.database\n"
        "from kairox_core.store.sql import SQLITE\n"
        "from kairox_core.store import SqliteStorage, database\n"
        "if TYPE_CHECKING:\n    from kairox_core.retrieval.base import RetrievalHit\n"
        "def f():\n    from kairox_core.cli.context import pass_cli\n"
    )
    assert outside_the_api(core_imports(source, "x.py")) == {
        "kairox_core.store.database",  # imported twice, both ways
        "kairox_core.retrieval.base",
        "kairox_core.cli.context",
    }


def test_kairox_postgres_imports_only_the_public_backend_api() -> None:
    offenders = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in sorted(BACKEND.glob("*.py"))
        for module in outside_the_api(core_imports(path.read_text(), str(path)))
    }
    assert not offenders, (
        "kairox-postgres imports core modules outside the backend API (see "
        "docs/architecture.md); import the name from a public module, or make it public "
        "there:\n" + "\n".join(sorted(offenders))
    )


@pytest.mark.parametrize("module", BACKEND_API)
def test_each_public_module_exports_what_it_lists(module: str) -> None:
    loaded = importlib.import_module(module)
    for name in getattr(loaded, "__all__", ()):
        assert getattr(loaded, name) is not None, f"{module}.{name}"
