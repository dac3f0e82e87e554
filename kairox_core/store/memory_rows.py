"""What every memory-store backend decides the same way, whatever its SQL dialect.

``SqliteMemoryStore`` and the PostgreSQL plugin's store keep their own SQL (and their
own way of serialising writers to a key); the rules live here once: what a valid
write is, who owns it, when it counts as approved, which row values a write and an
archived version store, how rows become records and a key's history, and how a
``list`` filter reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kairox_core.markers import MemoryScope
from kairox_core.memory.records import (
    MemoryRecord,
    MemoryVersion,
    Provenance,
    owner_of,
    parse_scope,
)

# The ``memories`` columns, in the order ``insert_values`` gives them.
COLUMNS = (
    "id, scope, owner, key, body, workspace_id, session_id, created_at, updated_at, "
    "approved_at, prov_session_id, prov_turn_id, prov_raw"
)
# The ``memory_history`` columns, in the order ``archived_values`` gives them.
HISTORY_COLUMNS = (
    "memory_id, scope, owner, key, body, valid_from, replaced_at, ended, approved_at, "
    "prov_session_id, prov_turn_id, prov_raw"
)
_SCOPES = {s.value: s for s in MemoryScope}


def check_body(body: object) -> str:
    """``body`` if it can be stored: a string with something in it."""
    if not isinstance(body, str) or not body.strip():
        raise ValueError("a memory body must be a non-empty string")
    return body


def approved_at(scope: MemoryScope | str, now: float) -> float | None:
    """Session memories are never reviewed (None); any other write is approved now."""
    return None if parse_scope(scope) == "session" else now


@dataclass(frozen=True)
class PutRequest:
    """A checked ``put``: the scope, its owner, and the ids the row keeps (a user memory
    keeps no workspace, only a session memory keeps its session)."""

    scope: MemoryScope
    owner: str
    key: str | None
    body: str
    workspace_id: str | None
    session_id: str | None
    provenance: Provenance

    @classmethod
    def of(
        cls,
        scope: MemoryScope | str,
        key: str | None,
        body: str,
        *,
        workspace_id: str | None,
        session_id: str | None,
        provenance: Provenance | None,
    ) -> PutRequest:
        scope = parse_scope(scope)
        owner = owner_of(scope, workspace_id=workspace_id, session_id=session_id)
        if key is None and scope != "session":
            raise ValueError(f"a {scope.value} memory needs a key")
        check_body(body)
        prov = provenance or Provenance(session_id=session_id)
        return cls(
            scope=scope,
            owner=owner,
            key=key,
            body=body,
            workspace_id=None if scope == "user" else workspace_id,
            session_id=session_id if scope == "session" else None,
            provenance=prov,
        )

    @property
    def lock_name(self) -> str:
        """A name for the (scope, owner, key) being written (an advisory lock's key)."""
        return f"memory\x1f{self.scope.value}\x1f{self.owner}\x1f{self.key}"

    def insert_values(self, memory_id: str, now: float) -> tuple[Any, ...]:
        """The new row's values, in ``COLUMNS`` order."""
        p = self.provenance
        return (
            memory_id,
            self.scope.value,
            self.owner,
            self.key,
            self.body,
            self.workspace_id,
            self.session_id,
            now,
            now,
            approved_at(self.scope, now),
            p.session_id,
            p.turn_id,
            p.raw,
        )

    def inserted(self, memory_id: str, now: float) -> MemoryRecord:
        """The record a new row holds."""
        return MemoryRecord(
            id=memory_id,
            scope=self.scope,
            key=self.key,
            body=self.body,
            workspace_id=self.workspace_id,
            session_id=self.session_id,
            created_at=now,
            updated_at=now,
            approved_at=approved_at(self.scope, now),
            provenance=self.provenance,
        )

    def replaced(self, row: Any, now: float) -> MemoryRecord:
        """The record an existing row (by column name) holds once this write replaced
        its body: its id, ids and creation kept, the body and provenance new."""
        return MemoryRecord(
            id=row["id"],
            scope=self.scope,
            key=self.key,
            body=self.body,
            workspace_id=row["workspace_id"],
            session_id=row["session_id"],
            created_at=row["created_at"],
            updated_at=now,
            approved_at=approved_at(self.scope, now),
            provenance=self.provenance,
        )


def archived_values(row: Any, now: float, ended: str) -> tuple[Any, ...]:
    """The ``memory_history`` values (``HISTORY_COLUMNS`` order) keeping a current row's
    body, valid from its last update until ``now``, ended by ``ended``."""
    if ended not in ("replaced", "edited", "deleted"):
        raise ValueError(f"unknown end of a memory version: {ended!r}")
    return (
        row["id"],
        row["scope"],
        row["owner"],
        row["key"],
        row["body"],
        row["updated_at"],
        now,
        ended,
        row["approved_at"],
        row["prov_session_id"],
        row["prov_turn_id"],
        row["prov_raw"],
    )


def provenance_from_row(row: Any) -> Provenance:
    """A memory row's ``Provenance`` (its ``prov_*`` columns, by name: any backend's)."""
    return Provenance(
        session_id=row["prov_session_id"], turn_id=row["prov_turn_id"], raw=row["prov_raw"] or ""
    )


def record_from_row(row: Any) -> MemoryRecord:
    """A ``MemoryRecord`` from a ``memories`` row with its columns by name (any backend's)."""
    return MemoryRecord(
        id=row["id"],
        scope=_SCOPES[row["scope"]],
        key=row["key"],
        body=row["body"],
        workspace_id=row["workspace_id"],
        session_id=row["session_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        approved_at=row["approved_at"],
        provenance=provenance_from_row(row),
    )


def versions(
    scope: MemoryScope, history: Iterable[Any], current: Any | None
) -> list[MemoryVersion]:
    """A key's history, oldest first: its archived rows (in id order), then the current
    row (if the key still has one) as the version nothing replaced yet."""
    out = [
        MemoryVersion(
            memory_id=r["memory_id"],
            scope=scope,
            key=r["key"],
            body=r["body"],
            valid_from=r["valid_from"],
            replaced_at=r["replaced_at"],
            ended=r["ended"],
            approved_at=r["approved_at"],
            provenance=provenance_from_row(r),
        )
        for r in history
    ]
    if current is not None:
        out.append(
            MemoryVersion(
                memory_id=current["id"],
                scope=scope,
                key=current["key"],
                body=current["body"],
                valid_from=current["updated_at"],
                replaced_at=None,
                ended=None,
                approved_at=current["approved_at"],
                provenance=provenance_from_row(current),
            )
        )
    return out


def list_filter(
    scope: MemoryScope | str | None,
    *,
    workspace_id: str | None,
    session_id: str | None,
    mark: str,
) -> tuple[str, list[object]]:
    """The ``WHERE`` condition of ``list`` and its parameters; ``mark`` is the dialect's
    placeholder (``?`` or ``%s``). No scope: all three; a session id narrows session
    memories to that session, else a workspace id narrows them to its sessions."""
    scopes: Sequence[MemoryScope] = [parse_scope(scope)] if scope is not None else list(MemoryScope)
    clauses: list[str] = []
    params: list[object] = []
    for s in scopes:
        if s == "user":
            clauses.append("scope = 'user'")
        elif s == "workspace":
            if workspace_id is None:
                clauses.append("scope = 'workspace'")
            else:
                clauses.append(f"(scope = 'workspace' AND owner = {mark})")
                params.append(workspace_id)
        elif session_id is not None:
            clauses.append(f"(scope = 'session' AND owner = {mark})")
            params.append(session_id)
        elif workspace_id is not None:
            clauses.append(f"(scope = 'session' AND workspace_id = {mark})")
            params.append(workspace_id)
        else:
            clauses.append("scope = 'session'")
    return " OR ".join(clauses), params


__all__ = [
    "COLUMNS",
    "HISTORY_COLUMNS",
    "PutRequest",
    "approved_at",
    "archived_values",
    "check_body",
    "list_filter",
    "provenance_from_row",
    "record_from_row",
    "versions",
]
