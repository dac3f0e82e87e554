from __future__ import annotations

from collections.abc import Iterator

import pytest

from kairox_postgres.testing import PgTestServer

pytest_plugins = ["kairox_core.testing.fixtures"]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgTestServer]:
    server = PgTestServer()
    yield server
    server.close()


@pytest.fixture
def pg_url(pg_server: PgTestServer) -> str:
    """A fresh, empty database for one test."""
    return pg_server.fresh_database()
