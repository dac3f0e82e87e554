"""The ``LongTermStore`` of a storage: its ``longterm`` (store.py).

Both built-in backends declare one (``StorageCapabilities(longterm=True)``: SQLite,
and PostgreSQL from kairox-postgres); a third-party storage that does not runs without
long-term memory and packs, and a use gets a clear error instead of an attribute error
deep inside a query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.errors import KairoxUserError
from kairox_core.longterm.store import LongTermStore

if TYPE_CHECKING:
    from kairox_core.store.protocol import Storage


def has_store(storage: Storage) -> bool:
    """Whether ``storage`` keeps long-term chunks and packs."""
    return storage.capabilities.longterm


def longterm_store(storage: Storage) -> LongTermStore:
    """``storage``'s long-term store (chunks and personal packs, beside the events)."""
    if not storage.capabilities.longterm:
        raise KairoxUserError(
            f"long-term memory and context packs are not on the {storage.name} storage "
            f"({type(storage).__name__} does not declare the `longterm` capability)"
        )
    return storage.longterm
