"""Installing kairox-llamaindex never pulls another framework's adapter dependencies."""

from __future__ import annotations

from kairox_core.testing.dependencies import runtime_closure

OTHER_FRAMEWORKS = {"langchain", "langchain-core", "langgraph", "openai-agents"}


def test_no_other_framework_in_the_runtime_closure() -> None:
    closure = runtime_closure("kairox-llamaindex")
    assert {"kairox-core", "llama-index-core"} <= closure
    assert not closure & OTHER_FRAMEWORKS, closure & OTHER_FRAMEWORKS
