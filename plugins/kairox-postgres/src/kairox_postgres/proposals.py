"""Memory proposals on PostgreSQL: the approval flow's table (the ``ProposalStore`` protocol).

A decision is a conditional ``UPDATE ... WHERE status = 'pending' RETURNING``: under
concurrent approvals from many hosts the row lock lets exactly one UPDATE match, the
others see the committed status and change nothing. At most one pending proposal per
(scope, owner, key): a unique partial index enforces it.
"""

from __future__ import annotations

from typing import Any

from kairox_core.markers import MemoryScope
from kairox_core.memory.records import Proposal
from kairox_core.store.proposal_store import proposal_from_row
from kairox_postgres.db import PgDatabase


class PgProposalStore:
    """The proposals table (writes nest in the storage's transactions)."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def close(self) -> None:
        """Nothing of its own to release: the storage closes the pool."""

    def insert(self, proposal: Proposal, owner: str) -> None:
        with self.db.atomic() as conn:
            _insert(conn, proposal, owner)

    def supersede(self, proposal_id: str, *, by: str, at: float) -> None:
        with self.db.atomic() as conn:
            conn.execute(
                "UPDATE memory_proposals SET status = 'superseded', resolved_at = %s, "
                "superseded_by = %s WHERE id = %s AND status = 'pending'",
                (at, by, proposal_id),
            )

    def accept(self, proposal_id: str, *, at: float, memory_id: str, final_body: str) -> bool:
        """Mark a pending proposal accepted; False when it was no longer pending."""
        with self.db.atomic() as conn:
            won = conn.execute(
                "UPDATE memory_proposals SET status = 'accepted', resolved_at = %s, "
                "memory_id = %s, final_body = %s WHERE id = %s AND status = 'pending' "
                "RETURNING id",
                (at, memory_id, final_body, proposal_id),
            ).fetchone()
        return won is not None

    def reject(self, proposal_id: str, *, at: float, reason: str | None) -> None:
        """Mark a pending proposal rejected; raises if another host decided it first (the
        caller's transaction, with its ``MemoryRejected`` event, then rolls back)."""
        from kairox_core.memory.approvals import ProposalNotPendingError

        with self.db.atomic() as conn:
            won = conn.execute(
                "UPDATE memory_proposals SET status = 'rejected', resolved_at = %s, "
                "reason = %s WHERE id = %s AND status = 'pending' RETURNING id",
                (at, reason, proposal_id),
            ).fetchone()
            if won is None:
                raise ProposalNotPendingError(f"proposal '{proposal_id}' was just decided")

    def get(self, proposal_id: str) -> Proposal | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT * FROM memory_proposals WHERE id = %s", (proposal_id,)
            ).fetchone()
        return proposal_from_row(row) if row is not None else None

    def pending_for(self, scope: MemoryScope, owner: str, key: str) -> Proposal | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT * FROM memory_proposals WHERE scope = %s AND owner = %s AND key = %s "
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
                sql += f" AND {column} = %s"
                params.append(value)
        with self.db.connection() as conn:
            rows = conn.execute(sql + " ORDER BY created_at, n", params).fetchall()
        return [proposal_from_row(r) for r in rows]


def _insert(conn: Any, p: Proposal, owner: str) -> None:
    conn.execute(
        "INSERT INTO memory_proposals (id, scope, owner, key, body, workspace_id, session_id, "
        "turn_id, raw, tainted, source, created_at, status, resolved_at, supersedes, "
        f"memory_id, final_body) VALUES ({', '.join(['%s'] * 17)})",
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
            bool(p.tainted),
            p.source,
            p.created_at,
            p.status,
            p.resolved_at,
            p.supersedes,
            p.memory_id,
            p.final_body,
        ),
    )
