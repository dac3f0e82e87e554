"""Installing kairox-llamaindex never pulls another framework's adapter dependencies."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, requires

OTHER_FRAMEWORKS = {"langchain", "langchain-core", "langgraph", "openai-agents"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def runtime_closure(dist: str) -> set[str]:
    """Every distribution ``dist`` needs at run time (extras and markers for other
    platforms aside), as installed here."""
    seen: set[str] = set()
    todo = [dist]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        todo += [_name(r) for r in reqs if "extra ==" not in r]
    return seen


def test_no_other_framework_in_the_runtime_closure() -> None:
    closure = runtime_closure("kairox-llamaindex")
    assert {"kairox-core", "llama-index-core"} <= closure
    assert not closure & OTHER_FRAMEWORKS, closure & OTHER_FRAMEWORKS
