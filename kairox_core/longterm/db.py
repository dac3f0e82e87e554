"""The ``LongTermStore`` of a storage: its ``longterm`` (store.py).

Both built-in backends have one (SQLite, and PostgreSQL from kairox-postgres); a
third-party storage without it runs without long-term memory and packs, and a use
gets a clear error instead of an attribute error deep inside a query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.errors import KairoxUserError
from kairox_core.longterm.store import LongTermStore

if TYPE_CHECKING:
    from kairox_core.store.protocol import Storage


def has_store(storage: Storage) -> bool:
    """Whether ``storage`` keeps long-term chunks and packs."""
    return isinstance(getattr(storage, "longterm", None), LongTermStore)


def longterm_store(storage: Storage) -> LongTermStore:
    """``storage``'s long-term store (chunks and personal packs, beside the events)."""
    store = getattr(storage, "longterm", None)
    if not isinstance(store, LongTermStore):
        raise KairoxUserError(
            f"long-term memory and context packs are not on the {storage.name} storage "
            f"({type(storage).__name__} has no `longterm` store)"
        )
    return store
