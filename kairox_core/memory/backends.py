"""Open the configured memory store (``[memory] store``) over a Kairox database.

The built-in ``sqlite`` store shares the event store's ``Database`` so approvals commit
as one transaction; any other name is looked up among the plugins'
``kairox_register_memory_stores`` factories and called with the database path.
"""

from __future__ import annotations

from kairox_core.config import BUILTIN_MEMORY_STORE, BUILTIN_NAMES
from kairox_core.memory.base import MemoryStore
from kairox_core.store.database import Database


def open_memory_store(name: str, db: Database) -> MemoryStore:
    if name == BUILTIN_MEMORY_STORE:
        from kairox_core.store.memory_store import SqliteMemoryStore

        return SqliteMemoryStore(db)
    from kairox_core.plugins import get_plugins

    registration = get_plugins().get(
        "memory_stores", name, context="[memory] store", builtin=BUILTIN_NAMES["memory_stores"]
    )
    store: MemoryStore = registration.factory(db.path or ":memory:")
    return store
