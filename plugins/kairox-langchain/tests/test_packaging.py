"""Installing kairox-langchain brings LangChain's framework and never another's."""

from __future__ import annotations

import re

from kairox_core.testing.dependencies import runtime_closure

OTHER_FRAMEWORKS = re.compile(
    r"^(openai-agents|llama-index.*|kairox-openai-agents|kairox-llamaindex)$"
)


def test_dependencies_hold_no_other_agent_framework() -> None:
    needed = runtime_closure("kairox-langchain")
    assert {"kairox-core", "langchain-core", "langgraph"} <= needed
    assert not [n for n in needed if OTHER_FRAMEWORKS.match(n)]
