"""The ``LongTermStore`` of a ``Kairox``: its storage's ``longterm`` (store.py).

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
    from kairox_core.facade import Kairox


def has_store(kx: Kairox) -> bool:
    """Whether ``kx``'s storage keeps long-term chunks and packs."""
    return kx.storage.capabilities.longterm


def longterm_store(kx: Kairox) -> LongTermStore:
    """``kx``'s long-term store (chunks and personal packs, beside the events)."""
    if not kx.storage.capabilities.longterm:
        raise KairoxUserError(
            f"long-term memory and context packs are not on the {kx.storage.name} storage "
            f"({type(kx.storage).__name__} does not declare the `longterm` capability)"
        )
    return kx.storage.longterm
