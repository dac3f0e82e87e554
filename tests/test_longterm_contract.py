"""The long-term store contract (kairox_core/testing/longterm_contract.py) on SQLite."""

from __future__ import annotations

from pathlib import Path

from kairox_core.store.protocol import Storage
from kairox_core.store.sqlite_storage import SqliteStorage
from kairox_core.testing.longterm_contract import LongTermStoreContract


class TestSqliteLongTermStore(LongTermStoreContract):
    def make_storage(self, tmp_path: Path) -> Storage:
        return SqliteStorage(tmp_path / "k.db")
