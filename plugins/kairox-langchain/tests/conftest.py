from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kairox_core import Kairox
from kairox_core.config import KairoxConfig

pytest_plugins = ["kairox_core.testing.fixtures"]


def make_config(**extra: object) -> KairoxConfig:
    """A small window (so history is trimmed by the budget), hashing embeddings."""
    data: dict[str, object] = {
        "profiles": {"default": {"model": "gpt-4o", "context_window": 4000, "reserve": 200}},
        "retrieval": {"backend": "hashing"},
    }
    data.update(extra)
    return KairoxConfig.model_validate(data)


@pytest.fixture
def kx(kairox_home: Path, tmp_path: Path) -> Iterator[Kairox]:
    with Kairox.open(tmp_path / "kx.db", make_config()) as opened:
        yield opened
