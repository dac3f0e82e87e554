"""Memory proposals waiting for (or past) a decision: the approval flow's table.

Every SQL statement on ``memory_proposals`` lives here; ``ApprovalService``
(memory/approvals.py) decides, this stores. At most one pending proposal per
(scope, owner, key): a unique partial index enforces it.
"""

from __future__ import annotations

import os
from typing import Any

from kairox_core.markers import MemoryScope
from kairox_core.memory.records import Proposal
from kairox_core.store.database import Database, DatabaseStore

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


class SqliteProposalStore(DatabaseStore):
    """The proposals table in the shared database (writes nest in its transactions)."""

    def __init__(self, path_or_conn: str | os.PathLike[str] | Database | Any) -> None:
        super().__init__(path_or_conn, COMPONENT, MIGRATIONS)

    def insert(self, proposal: Proposal, owner: str) -> None:
        with self.db.atomic() as conn:
            _insert(conn, proposal, owner)

    def supersede(self, proposal_id: str, *, by: str, at: float) -> None:
        with self.db.atomic() as conn:
            conn.execute(
                "UPDATE memory_proposals SET status = 'superseded', resolved_at = ?, "
                "superseded_by = ? WHERE id = ? AND status = 'pending'",
                (at, by, proposal_id),
            )

    def accept(self, proposal_id: str, *, at: float, memory_id: str, final_body: str) -> bool:
        """Mark a pending proposal accepted; False when it was no longer pending."""
        with self.db.atomic() as conn:
            changed = conn.execute(
                "UPDATE memory_proposals SET status = 'accepted', resolved_at = ?, "
                "memory_id = ?, final_body = ? WHERE id = ? AND status = 'pending'",
                (at, memory_id, final_body, proposal_id),
            ).rowcount
        return bool(changed)

    def reject(self, proposal_id: str, *, at: float, reason: str | None) -> None:
        with self.db.atomic() as conn:
            conn.execute(
                "UPDATE memory_proposals SET status = 'rejected', resolved_at = ?, reason = ? "
                "WHERE id = ?",
                (at, reason, proposal_id),
            )

    def get(self, proposal_id: str) -> Proposal | None:
        with self.db.lock:
            row = self.db.conn.execute(
                "SELECT * FROM memory_proposals WHERE id = ?", (proposal_id,)
            ).fetchone()
        return proposal_from_row(row) if row is not None else None

    def pending_for(self, scope: MemoryScope, owner: str, key: str) -> Proposal | None:
        with self.db.lock:
            row = self.db.conn.execute(
                "SELECT * FROM memory_proposals WHERE scope = ? AND owner = ? AND key = ? "
                "AND status = 'pending'",
                (scope.value, owner, key),
            ).fetchone()
        return proposal_from_row(row) if row is not None else None

    def list(
        self,
        *,
        status: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> list[Proposal]:
        """Proposals oldest first, optionally filtered."""
        sql, params = "SELECT * FROM memory_proposals WHERE 1 = 1", []
        for column, value in (
            ("status", status),
            ("workspace_id", workspace_id),
            ("session_id", session_id),
        ):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        with self.db.lock:
            rows = self.db.conn.execute(sql + " ORDER BY created_at, rowid", params).fetchall()
        return [proposal_from_row(r) for r in rows]


def _insert(conn: Any, p: Proposal, owner: str) -> None:
    conn.execute(
        "INSERT INTO memory_proposals (id, scope, owner, key, body, workspace_id, session_id, "
        "turn_id, raw, tainted, source, created_at, status, resolved_at, supersedes, "
        "memory_id, final_body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            p.id,
            p.scope.value,
            owner,
            p.key,
            p.body,
            p.workspace_id,
            p.session_id,
            p.turn_id,
            p.raw,
            int(p.tainted),
            p.source,
            p.created_at,
            p.status,
            p.resolved_at,
            p.supersedes,
            p.memory_id,
            p.final_body,
        ),
    )


def proposal_from_row(row: Any) -> Proposal:
    """A ``Proposal`` from a row with its columns by name (any backend's)."""
    return Proposal(
        id=row["id"],
        scope=MemoryScope(row["scope"]),
        key=row["key"],
        body=row["body"],
        tainted=bool(row["tainted"]),
        session_id=row["session_id"],
        workspace_id=row["workspace_id"],
        turn_id=row["turn_id"],
        raw=row["raw"],
        created_at=row["created_at"],
        status=row["status"],
        source=row["source"],
        resolved_at=row["resolved_at"],
        reason=row["reason"],
        supersedes=row["supersedes"],
        superseded_by=row["superseded_by"],
        memory_id=row["memory_id"],
        final_body=row["final_body"],
    )
