"""Installing kairox-openai-agents never pulls another framework's adapter dependencies."""

from __future__ import annotations

import re
from importlib import metadata

OTHER_FRAMEWORKS = ("langchain", "langgraph", "llama-index", "llama_index")


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return match.group(0).lower().replace("_", "-")


def installed_closure(root: str) -> set[str]:
    """Every distribution ``root`` needs, transitively (extras left out), as installed."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # an environment marker excluded it here
        todo += [_name(r) for r in requires if "extra ==" not in r]
    return seen


def test_no_other_framework_in_the_dependency_closure() -> None:
    closure = installed_closure("kairox-openai-agents")
    assert "openai-agents" in closure and "kairox-core" in closure
    assert not [n for n in closure if n.startswith(OTHER_FRAMEWORKS)]
