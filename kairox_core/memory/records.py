"""Memory records: what an accepted memory is, who owns it, where it came from.

User memories belong to the user (one user per database, owner ``"user"``), workspace
memories to their workspace, session memories to their session. A key is unique per
``(scope, owner)``; session memories may have no key.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kairox_core.errors import KairoxUserError
from kairox_core.markers import MemoryScope

USER_OWNER = "user"
SCOPES: tuple[str, ...] = tuple(s.value for s in MemoryScope)
_BY_NAME: dict[str, MemoryScope] = {s.value: s for s in MemoryScope}


class UnknownScopeError(KairoxUserError):
    """A scope name that is not session, user or workspace."""


class MemoryNotFoundError(KairoxUserError):
    """No memory (or proposal) with the given id."""


def parse_scope(value: str | MemoryScope) -> MemoryScope:
    """A ``MemoryScope`` from its name; a clear user error for anything else."""
    if isinstance(value, MemoryScope):
        return value
    known = _BY_NAME.get(value)
    if known is not None:
        return known
    try:
        return MemoryScope(str(value).strip().lower())
    except ValueError:
        raise UnknownScopeError(
            f"unknown memory scope '{value}'; use one of: {', '.join(SCOPES)}"
        ) from None


def owner_of(
    scope: str | MemoryScope, *, workspace_id: str | None = None, session_id: str | None = None
) -> str:
    """The owner a memory of ``scope`` belongs to; the id the scope needs must be given."""
    scope = parse_scope(scope)
    if scope == "user":
        return USER_OWNER
    if scope == "workspace":
        if not workspace_id:
            raise ValueError("a workspace memory needs workspace_id")
        return workspace_id
    if not session_id:
        raise ValueError("a session memory needs session_id")
    return session_id


def new_id(prefix: str) -> str:
    """Short random ids that are easy to type in the CLI (``m-`` memories, ``p-`` proposals)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Provenance:
    """Where a memory came from: the session and turn, and the marker's raw text."""

    session_id: str | None = None
    turn_id: str | None = None
    raw: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "turn_id": self.turn_id, "raw": self.raw}


@dataclass(frozen=True)
class MemoryRecord:
    """One accepted memory. ``approved_at`` is None for session memories (never reviewed).

    ``workspace_id`` is the owning workspace for workspace memories, the session's
    workspace for session memories (when known), and None for user memories.
    """

    id: str
    scope: MemoryScope
    key: str | None
    body: str
    workspace_id: str | None
    session_id: str | None
    created_at: float
    updated_at: float
    approved_at: float | None
    provenance: Provenance

    @property
    def owner(self) -> str:
        return owner_of(self.scope, workspace_id=self.workspace_id, session_id=self.session_id)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope.value,
            "key": self.key,
            "body": self.body,
            "workspace_id": self.workspace_id,
            "session_id": self.session_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "approved_at": self.approved_at,
            "provenance": self.provenance.as_dict(),
        }


@dataclass(frozen=True)
class MemoryVersion:
    """One body a memory has had. ``replaced_at`` is None for the current body; ``ended``
    says how an earlier body ended: ``"replaced"`` (a newer accepted write), ``"edited"``
    or ``"deleted"``."""

    memory_id: str
    scope: MemoryScope
    key: str | None
    body: str
    valid_from: float
    replaced_at: float | None
    ended: str | None
    approved_at: float | None
    provenance: Provenance

    def as_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "scope": self.scope.value,
            "key": self.key,
            "body": self.body,
            "valid_from": self.valid_from,
            "replaced_at": self.replaced_at,
            "ended": self.ended,
            "approved_at": self.approved_at,
            "provenance": self.provenance.as_dict(),
        }


@dataclass(frozen=True)
class Proposal:
    """A proposed memory. ``status``: pending, accepted, rejected or superseded."""

    id: str
    scope: MemoryScope
    key: str | None
    body: str
    tainted: bool
    session_id: str
    workspace_id: str | None
    turn_id: str | None
    raw: str
    created_at: float
    status: str = "pending"
    source: str = "assistant"
    resolved_at: float | None = None
    reason: str | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    memory_id: str | None = None
    final_body: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope.value,
            "key": self.key,
            "body": self.body,
            "tainted": self.tainted,
            "session_id": self.session_id,
            "workspace_id": self.workspace_id,
            "turn_id": self.turn_id,
            "raw": self.raw,
            "created_at": self.created_at,
            "status": self.status,
            "source": self.source,
            "resolved_at": self.resolved_at,
            "reason": self.reason,
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
            "memory_id": self.memory_id,
            "final_body": self.final_body,
        }
