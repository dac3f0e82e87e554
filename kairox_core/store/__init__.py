"""SQLite storage: the connection factory, migrations, the event and memory stores, and
``SqliteStorage`` (the built-in backend, public: a copy tool opens it by this name).

The stores are imported on first use, so importing ``kairox_core.store.connection``
(every SQLite user does) stays cheap and independent of the memory package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kairox_core.store.connection import connect, transaction

if TYPE_CHECKING:
    from kairox_core.store.database import Database
    from kairox_core.store.event_store import EventStore, SessionInfo
    from kairox_core.store.memory_store import SqliteMemoryStore
    from kairox_core.store.sqlite_storage import SqliteStorage

__all__ = [
    "Database",
    "EventStore",
    "SessionInfo",
    "SqliteMemoryStore",
    "SqliteStorage",
    "connect",
    "transaction",
]

_LAZY = {
    "Database": "kairox_core.store.database",
    "EventStore": "kairox_core.store.event_store",
    "SessionInfo": "kairox_core.store.event_store",
    "SqliteMemoryStore": "kairox_core.store.memory_store",
    "SqliteStorage": "kairox_core.store.sqlite_storage",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kairox_core.store' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
