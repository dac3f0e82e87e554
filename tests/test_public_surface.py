"""kairox_core.testing.public_api: what an adapter may import from the core."""

from __future__ import annotations

from pathlib import Path

import pytest

import kairox_core
from kairox_core.testing.public_api import non_public_imports


def test_every_root_export_resolves() -> None:
    for name in kairox_core.__all__:
        assert getattr(kairox_core, name) is not None, name


def test_all_lists_every_lazy_name() -> None:
    assert set(kairox_core.__all__) == {"__version__", "hookimpl", *kairox_core._LAZY}


def test_an_unknown_root_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        kairox_core.Nope  # noqa: B018


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("from kairox_core.session import Session\n", "module not public"),
        ("import kairox_core.facade\n", "import kairox_core.facade"),
        ("from kairox_core.tokens import get_encoding\n", "not in its public names"),
        ("from kairox_core import Nope\n", "not in its public names"),
        ("def f():\n    from kairox_core.sync import run_sync\n", "module not public"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from kairox_core.errors import KairoxError\n",
            "module not public",
        ),
    ],
)
def test_non_public_imports_are_found(tmp_path: Path, source: str, problem: str) -> None:
    package = tmp_path / "adapter"
    package.mkdir()
    (package / "mod.py").write_text(source)
    [found] = non_public_imports(package)
    assert found.startswith("adapter/mod.py:") and problem in found


def test_public_imports_pass(tmp_path: Path) -> None:
    package = tmp_path / "adapter"
    package.mkdir()
    (package / "mod.py").write_text(
        "from kairox_core import Kairox, KairoxUserError, run_sync\n"
        "from kairox_core.markers import extract_memory_markers\n"
        "from kairox_core.retrieval import RetrievalHit\n"
        "from kairox_core.tokens import TokenCounter\n"
        "import json\nfrom . import sibling\n"
    )
    assert non_public_imports(package) == []
