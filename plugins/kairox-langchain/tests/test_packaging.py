"""Installing kairox-langchain brings LangChain's framework and never another's."""

from __future__ import annotations

import re
from importlib import metadata

from packaging.requirements import Requirement

OTHER_FRAMEWORKS = re.compile(
    r"^(openai-agents|llama-index.*|kairox-openai-agents|kairox-llamaindex)$"
)


def _closure(name: str) -> set[str]:
    """Every distribution ``name`` needs installed (no extras), by installed metadata."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        key = re.sub(r"[-_.]+", "-", current).lower()
        if key in seen:
            continue
        seen.add(key)
        for line in metadata.requires(current) or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                metadata.distribution(req.name)
            except metadata.PackageNotFoundError:
                continue  # optional on this platform
            todo.append(req.name)
    return seen


def test_dependencies_hold_no_other_agent_framework() -> None:
    needed = _closure("kairox-langchain")
    assert {"kairox-core", "langchain-core", "langgraph"} <= needed
    assert not [n for n in needed if OTHER_FRAMEWORKS.match(n)]
