"""``SqliteMemoryStore``: accepted memories and their history, in the Kairox database.

Tables ``memories`` (the current body per (scope, owner, key)) and ``memory_history``
(every body a key had before), next to the event store's tables in the same file.
Writes run in ``BEGIN IMMEDIATE`` transactions, so two processes writing the same key
serialise, and each lookup reads the file afresh (no cache): a change made by the CLI
is visible to a running session at its next turn.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from kairox_core.store.database import Database, DatabaseStore
from kairox_core.store.memory_rows import (  # re-exported: backends imported them from here
    provenance_from_row as provenance_from_row,
)
from kairox_core.store.memory_rows import (
    record_from_row as record_from_row,
)
from kairox_core.store.sql.memories import SqlMemoryStore

COMPONENT = "memory"
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE memories (
        id TEXT PRIMARY KEY,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'user', 'workspace')),
        owner TEXT NOT NULL,
        key TEXT CHECK (key IS NOT NULL OR scope = 'session'),
        body TEXT NOT NULL,
        workspace_id TEXT,
        session_id TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        approved_at REAL,
        prov_session_id TEXT,
        prov_turn_id TEXT,
        prov_raw TEXT NOT NULL DEFAULT ''
    );
    CREATE UNIQUE INDEX memories_by_key ON memories (scope, owner, key) WHERE key IS NOT NULL;
    CREATE INDEX memories_by_workspace ON memories (workspace_id, scope);
    CREATE INDEX memories_by_session ON memories (session_id, scope);
    CREATE TABLE memory_history (
        id INTEGER PRIMARY KEY,
        memory_id TEXT NOT NULL,
        scope TEXT NOT NULL,
        owner TEXT NOT NULL,
        key TEXT,
        body TEXT NOT NULL,
        valid_from REAL NOT NULL,
        replaced_at REAL NOT NULL,
        ended TEXT NOT NULL CHECK (ended IN ('replaced', 'edited', 'deleted')),
        approved_at REAL,
        prov_session_id TEXT,
        prov_turn_id TEXT,
        prov_raw TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX memory_history_by_key ON memory_history (scope, owner, key, id);
    CREATE INDEX memory_history_by_memory ON memory_history (memory_id, id);
    """,
)


class SqliteMemoryStore(DatabaseStore, SqlMemoryStore[Database]):
    """The built-in ``MemoryStore``. ``SqliteMemoryStore(path)`` opens (and migrates) the
    database; pass the ``Database`` of an ``EventStore`` to share its connection, so an
    approval's memory write and its events commit together. The statements are the
    shared SQL store's (store/sql/memories.py)."""

    def __init__(
        self,
        path_or_conn: str | os.PathLike[str] | Database | Any,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(path_or_conn, COMPONENT, MIGRATIONS)
        self.clock = clock


__all__ = ["COMPONENT", "MIGRATIONS", "SqliteMemoryStore", "provenance_from_row", "record_from_row"]
