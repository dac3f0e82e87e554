"""Built-in plugin: the ``sqlite`` storage (events, memories, proposals, index in one file)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.hookspecs import StorageRegistrar, hookimpl

if TYPE_CHECKING:
    from kairox_core.store.protocol import Storage


def _open(target: str) -> Storage:
    from kairox_core.store.sqlite_storage import open_sqlite

    return open_sqlite(target)


@hookimpl
def kairox_register_storage(register: StorageRegistrar) -> None:
    register("sqlite", _open)
