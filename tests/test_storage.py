"""The built-in SQLite storage passes the storage contract; Kairox.open picks by URL."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kairox_core import Kairox
from kairox_core.config import KairoxConfig
from kairox_core.errors import UnknownNameError
from kairox_core.plugins import get_plugins
from kairox_core.store.database import lock_for
from kairox_core.store.protocol import Storage
from kairox_core.store.sqlite_storage import SqliteStorage
from kairox_core.testing.storage_contract import StorageContract


class TestSqliteStorageContract(StorageContract):
    def make_storage(self, tmp_path: Path) -> Storage:
        return SqliteStorage(tmp_path / "kx.db")


def test_sqlite_is_a_registered_storage(kairox_home: Path) -> None:
    assert get_plugins().get("storage", "sqlite").plugin.endswith("sqlite_storage")


def test_open_picks_the_storage_by_url_scheme(kairox_home: Path, tmp_path: Path) -> None:
    with Kairox.open(tmp_path / "a.db", KairoxConfig()) as kx:
        assert kx.storage.name == "sqlite" and kx.storage.location == str(tmp_path / "a.db")
    with Kairox.open(f"sqlite:///{tmp_path / 'b.db'}", KairoxConfig()) as kx:
        assert (tmp_path / "b.db").exists()
    if importlib.util.find_spec("kairox_postgres") is None:  # else its own tests cover it
        with pytest.raises(UnknownNameError, match="pip install kairox-postgres"):
            Kairox.open("postgresql://kairox@localhost/kairox", KairoxConfig())


def test_one_lock_guards_one_connection(kairox_home: Path, tmp_path: Path) -> None:
    with Kairox.open(tmp_path / "kx.db", KairoxConfig()) as kx:
        storage = kx.storage
        assert isinstance(storage, SqliteStorage)
        index = storage.workspace_index(kx.config, "w")
        assert index.lock is storage.db.lock is lock_for(storage.db.conn)
        assert storage.events.db is storage.memories.db is storage.proposals.db
