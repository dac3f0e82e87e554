"""Which of Kairox's names a package outside the core may import (docs/python-api.md).

A framework adapter is a separate distribution released on its own: it must keep
working while the core's modules move. ``non_public_imports(package_dir)`` lists every
import in the package's source that reaches past the public surface, so a test can
assert there is none:

    assert non_public_imports(Path(kairox_langchain.__file__).parent) == []
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

# The modules whose whole ``__all__`` is public, beside the package root
# (``kairox_core.__all__``), and the modules of which only some names are.
PUBLIC_MODULES = ("kairox_core", "kairox_core.markers", "kairox_core.retrieval")
PUBLIC_NAMES: dict[str, frozenset[str]] = {
    "kairox_core.tokens": frozenset({"TokenCounter"}),
    "kairox_core.attachments": frozenset({"from_path"}),
}


def public_names(module: str) -> frozenset[str] | None:
    """The names ``module`` exports publicly; None when the module is not public."""
    if module in PUBLIC_MODULES:
        return frozenset(importlib.import_module(module).__all__)
    return PUBLIC_NAMES.get(module)


def non_public_imports(package_dir: Path) -> list[str]:
    """``file:line: what`` for each import of a non-public kairox_core module or name in
    the ``.py`` files under ``package_dir`` (type-checking and function-level imports
    included)."""
    found: list[str] = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(package_dir.parent)
        for node in ast.walk(tree):
            for problem in _problems(node):
                found.append(f"{where}:{getattr(node, 'lineno', 0)}: {problem}")
    return found


def _problems(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [
            f"import {a.name} (import from kairox_core instead)"
            for a in node.names
            if a.name.startswith("kairox_core.") and public_names(a.name) is None
        ]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        module = node.module
        if module != "kairox_core" and not module.startswith("kairox_core."):
            return []
        allowed = public_names(module)
        if allowed is None:
            names = ", ".join(a.name for a in node.names)
            return [f"from {module} import {names} (module not public)"]
        return [
            f"from {module} import {a.name} (not in its public names)"
            for a in node.names
            if a.name not in allowed
        ]
    return []
