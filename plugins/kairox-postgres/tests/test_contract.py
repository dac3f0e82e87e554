"""The core's contract classes, unchanged, against a real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox_core.memory.base import MemoryStore
from kairox_core.store.protocol import Storage
from kairox_core.testing.memory_store_contract import MemoryStoreContract
from kairox_core.testing.storage_contract import StorageContract
from kairox_postgres.storage import PostgresStorage
from kairox_postgres.testing import PgTestServer


class TestPostgresStorage(StorageContract):
    @pytest.fixture(autouse=True)
    def _server(self, pg_server: PgTestServer) -> None:
        self.server = pg_server

    def make_storage(self, tmp_path: Path) -> Storage:
        return PostgresStorage(self.server.fresh_database())


class TestPostgresMemoryStore(MemoryStoreContract):
    @pytest.fixture(autouse=True)
    def _server(self, pg_server: PgTestServer) -> None:
        self.server = pg_server

    def make_store(self, tmp_path: Path) -> MemoryStore:
        storage = PostgresStorage(self.server.fresh_database())
        store = storage.memories
        store.close = storage.close  # type: ignore[method-assign]  # the store owns the pool here
        return store
