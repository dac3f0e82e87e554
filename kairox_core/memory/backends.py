"""Open the configured memory store (``[memory] store``) over a Kairox database.

The built-in ``sqlite`` store shares the event store's ``Database`` so approvals commit
as one transaction (the facade uses its storage's own memory store for it); any other
name is looked up among the plugins' ``kairox_register_memory_stores`` factories and
called with the database path.
"""

from __future__ import annotations

from kairox_core.config import BUILTIN_MEMORY_STORE, BUILTIN_NAMES
from kairox_core.memory.base import MemoryStore
from kairox_core.store.database import Database


def open_memory_store(name: str, db: Database | str) -> MemoryStore:
    """``db``: the shared ``Database``, or the storage's location (a path) for a plugin."""
    if name == BUILTIN_MEMORY_STORE and isinstance(db, Database):
        from kairox_core.store.memory_store import SqliteMemoryStore

        return SqliteMemoryStore(db)
    from kairox_core.plugins import MEMORY_STORES, get_plugins

    registration = get_plugins().get(
        MEMORY_STORES, name, context="[memory] store", builtin=BUILTIN_NAMES["memory_stores"]
    )
    target = db if isinstance(db, str) else db.path or ":memory:"
    return registration.factory(target)
