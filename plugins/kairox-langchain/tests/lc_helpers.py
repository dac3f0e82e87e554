"""Shared by the tests: a small Kairox configuration."""

from __future__ import annotations

from kairox_core import KairoxConfig


def make_config(**extra: object) -> KairoxConfig:
    """A small window (so history is trimmed by the budget), hashing embeddings."""
    data: dict[str, object] = {
        "profiles": {"default": {"model": "gpt-4o", "context_window": 4000, "reserve": 200}},
        "retrieval": {"backend": "hashing"},
    }
    data.update(extra)
    return KairoxConfig.model_validate(data)
