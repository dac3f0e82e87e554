"""The SQL stores, written once over a ``Dialect`` (public: a storage backend's API).

A SQL backend hands these stores its ``SqlDatabase`` (a connection per write
transaction, one to read with, its ``Dialect``) instead of writing them again; the
built-in SQLite storage does the same. A backend that appends events in its own SQL
(PostgreSQL does, for speed) builds on ``SqlEventLog`` and the event-row rules
re-exported here. See docs/architecture.md, "The storage backend API".
"""

from __future__ import annotations

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
from kairox_core.store.sql.memories import SqlMemoryStore
from kairox_core.store.sql.proposals import SqlProposalStore, proposal_from_row

__all__ = [
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
    "SqlMemoryStore",
    "SqlProposalStore",
    "SqlStore",
    "checked_batch",
    "event_from_row",
    "proposal_from_row",
    "session_changes",
]
