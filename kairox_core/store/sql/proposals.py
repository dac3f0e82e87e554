"""Memory proposals waiting for (or past) a decision: the approval flow's table, once for
every SQL backend.

``ApprovalService`` (memory/approvals.py) decides, this stores. A decision (accept,
reject, supersede) is a conditional ``UPDATE ... WHERE status = 'pending'``: it changes
a pending proposal only, and says whether it did, so of two deciders (two windows, two
hosts) exactly one wins and the other learns it lost. At most one pending proposal per
(scope, owner, key): a unique partial index enforces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kairox_core.markers import MemoryScope
from kairox_core.memory.records import Proposal
from kairox_core.store.sql.dialect import DB, SqlStore

_COLUMNS = (
    "id, scope, owner, key, body, workspace_id, session_id, turn_id, raw, tainted, source, "
    "created_at, status, resolved_at, supersedes, memory_id, final_body"
)
_IDS_PER_QUERY = 500  # turn ids bound in one query (SQLite allows 32,766 parameters)
_INSERT = f"INSERT INTO memory_proposals ({_COLUMNS}) VALUES ({', '.join('?' * 17)})"


class SqlProposalStore(SqlStore[DB]):
    """The ``memory_proposals`` table (writes nest in the database's transactions)."""

    def insert(self, proposal: Proposal, owner: str) -> None:
        with self.db.atomic() as conn:
            conn.execute(self._sql(_INSERT), _values(proposal, owner))

    def supersede(self, proposal_id: str, *, by: str, at: float) -> bool:
        """Mark a pending proposal superseded by ``by``; False when it was not pending."""
        return self._decide(
            "status = 'superseded', resolved_at = ?, superseded_by = ?", (at, by), proposal_id
        )

    def accept(self, proposal_id: str, *, at: float, memory_id: str, final_body: str) -> bool:
        """Mark a pending proposal accepted; False when it was not pending."""
        return self._decide(
            "status = 'accepted', resolved_at = ?, memory_id = ?, final_body = ?",
            (at, memory_id, final_body),
            proposal_id,
        )

    def reject(self, proposal_id: str, *, at: float, reason: str | None) -> bool:
        """Mark a pending proposal rejected; False when it was not pending (decided
        before, maybe by another process: the earlier decision stands)."""
        return self._decide(
            "status = 'rejected', resolved_at = ?, reason = ?", (at, reason), proposal_id
        )

    def _decide(self, assignments: str, params: tuple[Any, ...], proposal_id: str) -> bool:
        with self.db.atomic() as conn:
            won = conn.execute(
                self._sql(
                    f"UPDATE memory_proposals SET {assignments} "
                    "WHERE id = ? AND status = 'pending' RETURNING id"
                ),
                (*params, proposal_id),
            ).fetchone()
        return won is not None

    def get(self, proposal_id: str) -> Proposal | None:
        with self.db.reading() as conn:
            row = conn.execute(
                self._sql("SELECT * FROM memory_proposals WHERE id = ?"), (proposal_id,)
            ).fetchone()
        return proposal_from_row(row) if row is not None else None

    def pending_for(self, scope: MemoryScope, owner: str, key: str) -> Proposal | None:
        with self.db.reading() as conn:
            row = conn.execute(
                self._sql(
                    "SELECT * FROM memory_proposals WHERE scope = ? AND owner = ? AND key = ? "
                    "AND status = 'pending'"
                ),
                (scope.value, owner, key),
            ).fetchone()
        return proposal_from_row(row) if row is not None else None

    def for_turns(self, session_id: str, turn_ids: Sequence[str]) -> list[Proposal]:
        """The proposals the given turns of a session raised, oldest first (how history
        renders a reply's memory tags: ``kairox_core.memory.decided``)."""
        found: list[Proposal] = []
        ids = list(dict.fromkeys(turn_ids))
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start : start + _IDS_PER_QUERY]
            sql = (
                "SELECT * FROM memory_proposals WHERE session_id = ? AND turn_id IN "
                f"({', '.join('?' * len(chunk))}) ORDER BY created_at, {self.db.dialect.row_order}"
            )
            with self.db.reading() as conn:
                rows = conn.execute(self._sql(sql), (session_id, *chunk)).fetchall()
            found.extend(proposal_from_row(r) for r in rows)
        return found

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
        sql += f" ORDER BY created_at, {self.db.dialect.row_order}"
        with self.db.reading() as conn:
            rows = conn.execute(self._sql(sql), params).fetchall()
        return [proposal_from_row(r) for r in rows]


def _values(p: Proposal, owner: str) -> tuple[Any, ...]:
    return (
        p.id,
        p.scope.value,
        owner,
        p.key,
        p.body,
        p.workspace_id,
        p.session_id,
        p.turn_id,
        p.raw,
        bool(p.tainted),  # SQLite keeps it as 1/0, PostgreSQL as a BOOLEAN
        p.source,
        p.created_at,
        p.status,
        p.resolved_at,
        p.supersedes,
        p.memory_id,
        p.final_body,
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


__all__ = ["SqlProposalStore", "proposal_from_row"]
