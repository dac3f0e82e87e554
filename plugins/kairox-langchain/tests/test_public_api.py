"""kairox_langchain imports only Kairox's public names (docs/python-api.md): it is released on its
own, so a module moving inside kairox_core must not break it."""

from __future__ import annotations

from pathlib import Path

import kairox_langchain
from kairox_core.testing.public_api import non_public_imports


def test_imports_only_public_kairox_names() -> None:
    assert non_public_imports(Path(kairox_langchain.__file__).parent) == []
