"""Docs stay complete: every hook and every configuration key has a section."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from pydantic import BaseModel

from kairox_core import config, hookspecs

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_hook_is_documented_with_an_example() -> None:
    text = (DOCS / "hooks.md").read_text()
    sections = dict(re.findall(r"^## (\w+)\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    hooks = [
        name
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("kairox_")
    ]
    assert hooks
    for hook in hooks:
        assert hook in sections, f"docs/hooks.md has no section for {hook}"
        assert "```python" in sections[hook] and f"def {hook}" in sections[hook], hook


def _documented_keys() -> set[str]:
    text = (DOCS / "configuration.md").read_text()
    return set(re.findall(r"^\| `([\w.<>]+)` \|", text, re.M))


def test_every_config_key_is_documented() -> None:
    documented = _documented_keys()
    sections: dict[str, type[BaseModel]] = {
        "kairox": config.KairoxSection,
        "profiles.<name>": config.ProfileConfig,
        "knowledge_bases.<id>": config.KnowledgeBaseConfig,
        "providers.<id>": config.ProviderConfig,
        "memory": config.MemorySection,
        "retrieval": config.RetrievalSection,
        "compaction": config.CompactionSection,
        "recall": config.RecallSection,
        "longterm": config.LongTermSection,
        "packs": config.PacksSection,
        "tools": config.ToolsSection,
        "mcp_servers.<id>": config.McpServerConfig,
    }
    missing = [
        f"{prefix}.{field}"
        for prefix, model in sections.items()
        for field in model.model_fields
        if field != "id" and f"{prefix}.{field}" not in documented
    ]
    assert not missing, f"docs/configuration.md lacks: {missing}"
