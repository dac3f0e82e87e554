"""Built-in plugin: the ``sqlite`` memory store (``[memory] store = "sqlite"``)."""

from __future__ import annotations

from kairox_core.hookspecs import Register, hookimpl


def _open_sqlite_store(path: str) -> object:
    from kairox_core.store.memory_store import SqliteMemoryStore

    return SqliteMemoryStore(path)


@hookimpl
def kairox_register_memory_stores(register: Register) -> None:
    register("sqlite", _open_sqlite_store)
