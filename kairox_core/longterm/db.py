"""The database long-term chunks and packs live in: the SQLite storage's, for now.

The storage protocol (kairox_core/store/protocol.py) does not cover these tables yet;
a storage backend without a SQLite ``Database`` gets a clear error instead of an
attribute error deep inside a query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.errors import KairoxUserError
from kairox_core.store.database import Database

if TYPE_CHECKING:
    from kairox_core.facade import Kairox


def has_database(kx: Kairox) -> bool:
    """Whether ``kx``'s storage has the SQLite database these tables live in (a storage
    without one, e.g. ``postgresql``, runs without long-term memory and packs for now)."""
    return isinstance(getattr(kx.storage, "db", None), Database)


def database(kx: Kairox) -> Database:
    """``kx``'s SQLite database (long-term chunks and packs share it with the events)."""
    db = getattr(kx.storage, "db", None)
    if not isinstance(db, Database):
        raise KairoxUserError(
            f"long-term memory and context packs need the SQLite storage; this Kairox "
            f"uses {type(kx.storage).__name__}"
        )
    return db
