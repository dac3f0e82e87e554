from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lc_helpers import make_config

from kairox_core import Kairox

pytest_plugins = ["kairox_core.testing.fixtures"]


@pytest.fixture
def kx(kairox_home: Path, tmp_path: Path) -> Iterator[Kairox]:
    with Kairox.open(tmp_path / "kx.db", make_config()) as opened:
        yield opened
