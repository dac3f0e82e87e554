"""Installing kairox-openai-agents never pulls another framework's adapter dependencies."""

from __future__ import annotations

from kairox_core.testing.dependencies import runtime_closure

OTHER_FRAMEWORKS = ("langchain", "langgraph", "llama-index", "llama_index")


def test_no_other_framework_in_the_dependency_closure() -> None:
    closure = runtime_closure("kairox-openai-agents")
    assert "openai-agents" in closure and "kairox-core" in closure
    assert not [n for n in closure if n.startswith(OTHER_FRAMEWORKS)]
