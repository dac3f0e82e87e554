"""The SQL stores, written once over a ``Dialect`` (public: a storage backend's API).

A SQL backend hands these stores its ``SqlDatabase`` (a connection per write
transaction, one to read with, its ``Dialect``) instead of writing them again; the
built-in SQLite storage does the same. See docs/architecture.md, "The backend API".
"""

from __future__ import annotations

from kairox_core.store.sql.dialect import POSTGRES, SQLITE, Dialect, SqlDatabase, SqlStore
from kairox_core.store.sql.leases import SqlLeaseStore
from kairox_core.store.sql.memories import SqlMemoryStore
from kairox_core.store.sql.proposals import SqlProposalStore, proposal_from_row

__all__ = [
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "SqlDatabase",
    "SqlLeaseStore",
    "SqlMemoryStore",
    "SqlProposalStore",
    "SqlStore",
    "proposal_from_row",
]
