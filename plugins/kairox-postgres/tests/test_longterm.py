"""The core's long-term store contract, unchanged, against a real PostgreSQL + pgvector."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox_core.store.protocol import Storage
from kairox_core.testing.longterm_contract import LongTermStoreContract
from kairox_postgres.storage import PostgresStorage
from kairox_postgres.testing import PgTestServer


class TestPostgresLongTermStore(LongTermStoreContract):
    @pytest.fixture(autouse=True)
    def _server(self, pg_server: PgTestServer) -> None:
        self.server = pg_server

    def make_storage(self, tmp_path: Path) -> Storage:
        return PostgresStorage(self.server.fresh_database())
