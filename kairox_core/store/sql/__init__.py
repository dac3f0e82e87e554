"""The SQL stores, written once over a ``Dialect`` (public: a storage backend's API).

A SQL backend hands these stores its ``SqlDatabase`` (a connection per write
transaction, one to read with, its ``Dialect``) instead of writing them again; the
built-in SQLite storage does the same. A backend that appends events in its own SQL
(PostgreSQL does, for speed) builds on ``SqlEventLog`` and the event-row rules
re-exported here. See docs/architecture.md, "The storage backend API".
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kairox_core.store.event_rows import (
        COMPACTION_EVENT_TYPES,
        COMPACTION_RUN_TYPES,
        CONVERSATION_TYPES,
        HISTORY_COLUMNS,
        SessionChanges,
        checked_batch,
        event_from_row,
        session_changes,
    )
    from kairox_core.store.sql.dialect import POSTGRES, SQLITE, Dialect, SqlDatabase, SqlStore
    from kairox_core.store.sql.events import SqlEventLog
    from kairox_core.store.sql.leases import SqlLeaseStore
    from kairox_core.store.sql.longterm import CHUNK_COLUMNS, SqlLongTermStore, chunk_from_row
    from kairox_core.store.sql.memories import SqlMemoryStore
    from kairox_core.store.sql.proposals import SqlProposalStore, proposal_from_row

_LAZY = {
    "COMPACTION_EVENT_TYPES": "kairox_core.store.event_rows",
    "COMPACTION_RUN_TYPES": "kairox_core.store.event_rows",
    "CONVERSATION_TYPES": "kairox_core.store.event_rows",
    "HISTORY_COLUMNS": "kairox_core.store.event_rows",
    "SessionChanges": "kairox_core.store.event_rows",
    "checked_batch": "kairox_core.store.event_rows",
    "event_from_row": "kairox_core.store.event_rows",
    "session_changes": "kairox_core.store.event_rows",
    "POSTGRES": "kairox_core.store.sql.dialect",
    "SQLITE": "kairox_core.store.sql.dialect",
    "Dialect": "kairox_core.store.sql.dialect",
    "SqlDatabase": "kairox_core.store.sql.dialect",
    "SqlStore": "kairox_core.store.sql.dialect",
    "SqlEventLog": "kairox_core.store.sql.events",
    "SqlLeaseStore": "kairox_core.store.sql.leases",
    "CHUNK_COLUMNS": "kairox_core.store.sql.longterm",
    "SqlLongTermStore": "kairox_core.store.sql.longterm",
    "chunk_from_row": "kairox_core.store.sql.longterm",
    "SqlMemoryStore": "kairox_core.store.sql.memories",
    "SqlProposalStore": "kairox_core.store.sql.proposals",
    "proposal_from_row": "kairox_core.store.sql.proposals",
}


def __getattr__(name: str) -> Any:
    """The stores load on first use: ``store/database.py`` imports the dialect alone."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kairox_core.store.sql' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "CHUNK_COLUMNS",
    "COMPACTION_EVENT_TYPES",
    "COMPACTION_RUN_TYPES",
    "CONVERSATION_TYPES",
    "HISTORY_COLUMNS",
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "SessionChanges",
    "SqlDatabase",
    "SqlEventLog",
    "SqlLeaseStore",
    "SqlLongTermStore",
    "SqlMemoryStore",
    "SqlProposalStore",
    "SqlStore",
    "checked_batch",
    "chunk_from_row",
    "event_from_row",
    "proposal_from_row",
    "session_changes",
]
