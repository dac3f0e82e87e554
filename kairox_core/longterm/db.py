"""The ``LongTermStore`` of a ``Kairox``: its storage's ``longterm`` (store.py).

Both built-in backends have one (SQLite, and PostgreSQL from kairox-postgres); a
third-party storage without it runs without long-term memory and packs, and a use
gets a clear error instead of an attribute error deep inside a query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.errors import KairoxUserError
from kairox_core.longterm.store import LongTermStore

if TYPE_CHECKING:
    from kairox_core.facade import Kairox


def has_store(kx: Kairox) -> bool:
    """Whether ``kx``'s storage keeps long-term chunks and packs."""
    return isinstance(getattr(kx.storage, "longterm", None), LongTermStore)


def longterm_store(kx: Kairox) -> LongTermStore:
    """``kx``'s long-term store (chunks and personal packs, beside the events)."""
    store = getattr(kx.storage, "longterm", None)
    if not isinstance(store, LongTermStore):
        raise KairoxUserError(
            f"long-term memory and context packs are not on the {kx.storage.name} storage "
            f"({type(kx.storage).__name__} has no `longterm` store)"
        )
    return store
