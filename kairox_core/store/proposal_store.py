"""Memory proposals on SQLite: the table's schema; the statements are the shared SQL
store's (store/sql/proposals.py)."""

from __future__ import annotations

import os
from typing import Any

from kairox_core.store.database import Database, DatabaseStore
from kairox_core.store.sql.proposals import SqlProposalStore
from kairox_core.store.sql.proposals import (  # re-exported: backends imported it from here
    proposal_from_row as proposal_from_row,
)

COMPONENT = "memory_proposals"
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE memory_proposals (
        id TEXT PRIMARY KEY,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'user', 'workspace')),
        owner TEXT NOT NULL,
        key TEXT,
        body TEXT NOT NULL,
        workspace_id TEXT,
        session_id TEXT NOT NULL,
        turn_id TEXT,
        raw TEXT NOT NULL DEFAULT '',
        tainted INTEGER NOT NULL DEFAULT 0,
        source TEXT NOT NULL DEFAULT 'assistant',
        created_at REAL NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'accepted', 'rejected', 'superseded')),
        resolved_at REAL,
        reason TEXT,
        supersedes TEXT,
        superseded_by TEXT,
        memory_id TEXT,
        final_body TEXT
    );
    CREATE UNIQUE INDEX memory_proposals_one_pending
        ON memory_proposals (scope, owner, key) WHERE status = 'pending';
    CREATE INDEX memory_proposals_by_status ON memory_proposals (status, created_at);
    """,
)


class SqliteProposalStore(DatabaseStore, SqlProposalStore[Database]):
    """The proposals table in the shared SQLite database (writes nest in its transactions)."""

    def __init__(self, path_or_conn: str | os.PathLike[str] | Database | Any) -> None:
        super().__init__(path_or_conn, COMPONENT, MIGRATIONS)


__all__ = ["COMPONENT", "MIGRATIONS", "SqliteProposalStore", "proposal_from_row"]
