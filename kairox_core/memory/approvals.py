"""The approval flow: every memory the model proposes passes through here.

Session memories are accepted at once (``MemoryProposed`` then ``MemoryAccepted``),
unless tainted (their body repeats this turn's tool result or retrieved text, so the
model may be relaying someone else's instruction): those wait like the rest. User
and workspace memories wait in the ``memory_proposals`` table (so they survive a
restart) until a person accepts, edits-then-accepts or rejects them; a newer proposal
for the same (scope, owner, key) supersedes the pending one, and a proposal that would
not change the accepted body is not raised at all.

Only markers from the assistant's own output should reach ``propose``: the facade
passes the markers extracted from the model's stream, never text from user messages,
tool results or retrieved chunks (those stay plain text).

Events go to the session the proposal came from. Changes made outside any session
(the CLI, ``remember``/``edit_memory``/``delete_memory`` without ``session_id``) go to a
per-workspace maintenance session ``_memory:<workspace>`` (``_memory:user`` for user
memories), so the audit trail stays in the event store.

When the memory store shares the event store's ``Database`` (the built-in setup), each
operation (memory write, proposal row, events) is one transaction. The proposal rows
are kept by the storage (``SqliteProposalStore``); no SQL here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from kairox_core.errors import KairoxUserError
from kairox_core.events import (
    Event,
    MemoryAccepted,
    MemoryDeleted,
    MemoryEdited,
    MemoryProposed,
    MemoryRejected,
    SessionArchived,
)
from kairox_core.inputs import check_key, check_session_id, check_text, check_workspace_id
from kairox_core.markers import MemoryScope
from kairox_core.memory.base import MemoryStore
from kairox_core.memory.records import (
    MemoryNotFoundError,
    MemoryRecord,
    Proposal,
    Provenance,
    new_id,
    owner_of,
    parse_scope,
)
from kairox_core.memory.scope_check import ScopeVerdict
from kairox_core.store.database import DatabaseStore
from kairox_core.store.event_store import EventStore
from kairox_core.store.proposal_store import SqliteProposalStore
from kairox_core.store.protocol import EventLog, ProposalStore

MAINTENANCE_PREFIX = "_memory:"


class ProposalNotPendingError(KairoxUserError):
    """The proposal was already accepted, rejected or superseded."""


class MarkerLike(Protocol):
    """What ``propose`` needs from a marker (``kairox_core.markers.MemoryMarker``)."""

    @property
    def scope(self) -> Any: ...
    @property
    def key(self) -> str | None: ...
    @property
    def body(self) -> str: ...


def maintenance_session_id(workspace_id: str | None) -> str:
    """Where events of memory changes made outside a session are written."""
    return f"{MAINTENANCE_PREFIX}{workspace_id or 'user'}"


class ApprovalService:
    """Routes proposals, keeps the pending ones, and records every decision as events."""

    def __init__(
        self,
        event_store: EventLog,
        memory_store: MemoryStore,
        *,
        proposals: ProposalStore | None = None,
        shared: bool | None = None,
        max_body_chars: int = 2000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``proposals``: the storage's proposal table (None: the SQLite one beside
        ``event_store``). ``shared``: whether the memory store writes in the event
        store's transactions (None: when both sit on one SQLite ``Database``)."""
        self.events = event_store
        self.memories = memory_store
        self.max_body_chars = max_body_chars
        self.clock = clock
        if shared is None:  # both stores on one SQLite Database: one transaction
            shared = (
                isinstance(event_store, DatabaseStore)
                and isinstance(memory_store, DatabaseStore)
                and memory_store.db is event_store.db
            )
        self._shared = shared
        self._own: SqliteProposalStore | None = None
        if proposals is None:
            if not isinstance(event_store, EventStore):
                raise TypeError("give the storage's proposal store (proposals=...)")
            proposals = self._own = SqliteProposalStore(event_store.db)
        self.store = proposals

    def close(self) -> None:
        """Release the proposal store this service opened (a given one is the caller's)."""
        if self._own is not None:
            self._own.close()
            self._own = None

    @contextmanager
    def _unit(self) -> Iterator[None]:
        """One transaction around memory write + proposal row + events, when they share
        a connection; otherwise the memory write commits first, then the rest."""
        if self._shared:
            with self.events.atomic():
                yield
        else:
            yield

    # --- proposals from the model ------------------------------------------------------

    def propose(
        self,
        session_id: str,
        workspace_id: str | None,
        turn_id: str | None,
        marker: MarkerLike,
        *,
        tainted: bool = False,
    ) -> Proposal | None:
        """Route one marker from the assistant's output; None when it would change nothing.

        A session memory is accepted at once unless ``tainted``: taint is the signal that
        the model is repeating untrusted text, so a person decides, as for the others."""
        return self.route(session_id, workspace_id, turn_id, marker, tainted=tainted)[0]

    def route(
        self,
        session_id: str,
        workspace_id: str | None,
        turn_id: str | None,
        marker: MarkerLike,
        *,
        tainted: bool = False,
        scope_check: ScopeVerdict | None = None,
    ) -> tuple[Proposal | None, list[Event]]:
        """``propose``, also returning the events it recorded as stored (``MemoryProposed``
        and, for a session memory taken at once, ``MemoryAccepted``): a turn hands them
        to its caller, which then need not read the log for them.

        ``scope_check``: the verdict that chose ``marker.scope``; the event records the
        scope the model wrote and the check's note. It can never make a memory that
        needed a person auto-accepted: that is refused here too, not only in the check."""
        scope = parse_scope(marker.scope)
        if (
            scope_check is not None
            and scope == MemoryScope.SESSION
            and scope_check.model_scope != MemoryScope.SESSION
        ):
            raise ValueError("a scope check must never move a memory into session scope")
        return self._propose(
            scope,
            marker.key,
            marker.body,
            session_id=session_id,
            workspace_id=workspace_id,
            turn_id=turn_id,
            raw=str(getattr(marker, "raw", "") or ""),
            tainted=tainted,
            source="assistant",
            auto_accept=scope == "session" and not tainted,
            scope_check=scope_check,
        )

    def _propose(
        self,
        scope: MemoryScope,
        key: str | None,
        body: str,
        *,
        session_id: str,
        workspace_id: str | None,
        turn_id: str | None,
        raw: str,
        tainted: bool,
        source: str,
        auto_accept: bool,
        scope_check: ScopeVerdict | None = None,
    ) -> tuple[Proposal | None, list[Event]]:
        if source == "user":
            self._check_body(body)  # markers were already checked by the parser
        elif not body.strip():
            raise ValueError("a memory body must not be empty")
        owner = owner_of(scope, workspace_id=workspace_id, session_id=session_id)
        if key is None and scope != "session":
            raise ValueError(f"a {scope.value} memory needs a key")
        with self._unit():
            if self._unchanged(scope, key, body, workspace_id=workspace_id, session_id=session_id):
                return None, []
            pending = self._pending_for(scope, owner, key)
            if pending is not None and pending.body == body and not auto_accept:
                return None, []  # already waiting for a decision
            if key is None and not auto_accept and self._pending_keyless(session_id, body):
                return None, []  # a tainted keyless session memory, already waiting
            now = self.clock()
            proposal = Proposal(
                id=new_id("p"),
                scope=scope,
                key=key,
                body=body,
                tainted=tainted,
                session_id=session_id,
                workspace_id=workspace_id,
                turn_id=turn_id,
                raw=raw,
                created_at=now,
                source=source,
                supersedes=pending.id if pending is not None else None,
            )
            record = None
            if auto_accept:
                record = self.memories.put(
                    scope,
                    key,
                    body,
                    workspace_id=workspace_id,
                    session_id=session_id,
                    provenance=Provenance(session_id, turn_id, raw),
                )
            events: list[Event] = [
                MemoryProposed(
                    session_id=session_id,
                    proposal_id=proposal.id,
                    scope=scope.value,
                    key=key,
                    body=body,
                    workspace_id=workspace_id,
                    turn_id=turn_id,
                    raw=raw,
                    tainted=tainted,
                    supersedes=proposal.supersedes,
                    source=source,
                    model_scope=scope_check.model_scope.value if scope_check else None,
                    scope_check=scope_check.note if scope_check else None,
                )
            ]
            if record is not None:
                events.append(self._accepted_event(proposal, record, edited=False))
                proposal = _replace(
                    proposal,
                    status="accepted",
                    resolved_at=now,
                    memory_id=record.id,
                    final_body=body,
                )
            with self.events.atomic():
                if pending is not None:
                    self.store.supersede(pending.id, by=proposal.id, at=now)
                self.store.insert(proposal, owner)
                stored = self.events.append_many(events)
            return proposal, stored

    def _unchanged(
        self,
        scope: MemoryScope,
        key: str | None,
        body: str,
        *,
        workspace_id: str | None,
        session_id: str,
    ) -> bool:
        if key is not None:
            current = self.memories.get(
                scope, key, workspace_id=workspace_id, session_id=session_id
            )
            return current is not None and current.body == body
        return any(
            m.key is None and m.body == body
            for m in self.memories.list(scope, session_id=session_id)
        )

    def _accepted_event(
        self, proposal: Proposal, record: MemoryRecord, *, edited: bool
    ) -> MemoryAccepted:
        return MemoryAccepted(
            session_id=proposal.session_id,
            proposal_id=proposal.id,
            memory_id=record.id,
            scope=record.scope.value,
            key=record.key,
            body=record.body,
            edited=edited,
            workspace_id=proposal.workspace_id,
        )

    # --- decisions -------------------------------------------------------------------------

    def pending(
        self, *, workspace_id: str | None = None, session_id: str | None = None
    ) -> list[Proposal]:
        """Proposals waiting for a decision, oldest first (optionally those raised in one
        workspace or session)."""
        return self.proposals(status="pending", workspace_id=workspace_id, session_id=session_id)

    def proposals(
        self,
        *,
        status: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> list[Proposal]:
        """Every proposal ever made (the audit view), oldest first, optionally filtered."""
        return self.store.list(status=status, workspace_id=workspace_id, session_id=session_id)

    def get_proposal(self, proposal_id: str) -> Proposal | None:
        return self.store.get(proposal_id)

    def accept(
        self,
        proposal_id: str,
        body: str | None = None,
        *,
        scope: MemoryScope | str | None = None,
        key: str | None = None,
    ) -> MemoryRecord:
        """Accept a pending proposal; ``body``, ``scope`` and ``key``, when given, replace
        what the model proposed (a person fixes a personal fact filed under
        ``workspace``, or its key): the memory is stored as corrected and the
        ``MemoryAccepted`` event says so (``edited``, its own scope and key)."""
        with self._unit():
            proposal = self._require_pending(proposal_id)
            final = proposal.body if body is None else body
            self._check_body(final)
            final_scope, final_key = self._corrected(proposal, scope, key)
            record = self.memories.put(
                final_scope,
                final_key,
                final,
                workspace_id=proposal.workspace_id,
                session_id=proposal.session_id,
                provenance=Provenance(proposal.session_id, proposal.turn_id, proposal.raw),
            )
            proposed = (proposal.body, proposal.scope, proposal.key)
            edited = (final, final_scope, final_key) != proposed
            with self.events.atomic():
                changed = self.store.accept(
                    proposal_id, at=self.clock(), memory_id=record.id, final_body=final
                )
                if not changed:  # decided by someone else meanwhile
                    raise ProposalNotPendingError(f"proposal '{proposal_id}' was just decided")
                self.events.append(self._accepted_event(proposal, record, edited=edited))
            return record

    def _corrected(
        self, proposal: Proposal, scope: MemoryScope | str | None, key: str | None
    ) -> tuple[MemoryScope, str | None]:
        """The scope and key a proposal is accepted under, checked as a marker's are."""
        final_scope = proposal.scope if scope is None else parse_scope(scope)
        final_key = proposal.key if key is None else key.strip()
        if final_scope is MemoryScope.WORKSPACE and not proposal.workspace_id:
            raise KairoxUserError(
                f"proposal '{proposal.id}' was made outside any workspace: it cannot be "
                f"stored as a workspace memory; choose scope user or session"
            )
        if final_key == "" or (final_key is None and final_scope is not MemoryScope.SESSION):
            raise KairoxUserError(
                f"a {final_scope.value} memory needs a key: give one with key=... "
                f"(`--key` on the command line)"
            )
        if final_key is not None:
            check_key(final_key)
        return final_scope, final_key

    def reject(self, proposal_id: str, reason: str | None = None) -> Proposal:
        """Reject a pending proposal; the reason is kept in the event and the table."""
        with self.events.atomic():
            proposal = self._require_pending(proposal_id)
            now = self.clock()
            if not self.store.reject(proposal_id, at=now, reason=reason):
                # decided by someone else meanwhile: their decision stands
                raise ProposalNotPendingError(f"proposal '{proposal_id}' was just decided")
            self.events.append(
                MemoryRejected(
                    session_id=proposal.session_id,
                    proposal_id=proposal.id,
                    scope=proposal.scope.value,
                    key=proposal.key,
                    reason=reason,
                )
            )
        return _replace(proposal, status="rejected", resolved_at=now, reason=reason)

    # --- a person's own changes --------------------------------------------------------------

    def propose_external(
        self,
        scope: MemoryScope | str,
        key: str,
        body: str,
        *,
        workspace_id: str | None = None,
        source: str = "mcp",
    ) -> Proposal | None:
        """A memory proposed from outside a session (an MCP client): it waits for a
        person's approval like the model's own, so no ``session`` scope (which would be
        accepted at once). Events go to the maintenance session of the workspace (or of
        the user). None when it would change nothing."""
        scope = parse_scope(scope)
        if scope == "session":
            raise KairoxUserError(
                "a proposal from outside a session must be scope 'user' or 'workspace' "
                "(session memories are accepted at once, without review)"
            )
        self._check_ids(scope, key, workspace_id=workspace_id, session_id=None)
        self._check_body(body)
        proposal, _ = self._propose(
            scope,
            key,
            body,
            session_id=maintenance_session_id(workspace_id if scope == "workspace" else None),
            workspace_id=workspace_id,
            turn_id=None,
            raw="",
            tainted=False,
            source=source,
            auto_accept=False,
        )
        return proposal

    def remember(
        self,
        scope: MemoryScope | str,
        key: str | None,
        body: str,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> MemoryRecord:
        """A memory a person writes: accepted at once (MemoryProposed + MemoryAccepted).

        Events go to ``session_id`` if given, else to the maintenance session of
        ``workspace_id`` (or of the user)."""
        scope = parse_scope(scope)
        self._check_ids(scope, key, workspace_id=workspace_id, session_id=session_id)
        proposal, _ = self._propose(
            scope,
            key,
            body,
            session_id=session_id or maintenance_session_id(workspace_id),
            workspace_id=workspace_id,
            turn_id=None,
            raw="",
            tainted=False,
            source="user",
            auto_accept=True,
        )
        if proposal is not None and proposal.memory_id is not None:
            record = self.memories.get_by_id(proposal.memory_id)
        elif key is not None:  # the body was already the accepted one
            record = self.memories.get(scope, key, workspace_id=workspace_id, session_id=session_id)
        else:
            record = next(
                (
                    m
                    for m in self.memories.list(scope, session_id=session_id)
                    if m.key is None and m.body == body
                ),
                None,
            )
        if record is None:  # pragma: no cover - removed by another process meanwhile
            raise MemoryNotFoundError("the memory was removed while it was being written")
        return record

    def edit_memory(
        self, memory_id: str, body: str, *, session_id: str | None = None
    ) -> MemoryRecord:
        """Change an accepted memory's body by hand (MemoryEdited)."""
        self._check_body(body)
        with self._unit():
            before = self._require_memory(memory_id)
            if before.body == body:
                return before
            after = self.memories.update_body(memory_id, body)
            self.events.append(
                MemoryEdited(
                    session_id=session_id or self._home_session(before),
                    memory_id=memory_id,
                    scope=before.scope.value,
                    key=before.key,
                    body=body,
                    previous_body=before.body,
                )
            )
            return after

    def delete_memory(self, memory_id: str, *, session_id: str | None = None) -> MemoryRecord:
        """Remove an accepted memory (MemoryDeleted); returns what was deleted."""
        with self._unit():
            before = self._require_memory(memory_id)
            self.memories.delete(memory_id)
            self.events.append(
                MemoryDeleted(
                    session_id=session_id or self._home_session(before),
                    memory_id=memory_id,
                    scope=before.scope.value,
                    key=before.key,
                    body=before.body,
                    workspace_id=before.workspace_id,
                )
            )
            return before

    def archive_session(self, session_id: str, *, reason: str | None = None) -> int:
        """Archive a session: append ``SessionArchived`` and discard its session memories
        (one transaction with the built-in store). Pending user/workspace proposals it
        raised stay pending: they are about the user or workspace, not the session.
        Returns how many session memories were discarded."""
        with self._unit():
            discarded = self.memories.archive_session(session_id)
            self.events.append(SessionArchived(session_id=session_id, reason=reason))
            return discarded

    # --- helpers -------------------------------------------------------------------------------

    def _home_session(self, record: MemoryRecord) -> str:
        if record.scope == "session" and record.session_id:
            return record.session_id
        return maintenance_session_id(record.workspace_id)

    def _check_ids(
        self,
        scope: MemoryScope,
        key: str | None,
        *,
        workspace_id: str | None,
        session_id: str | None,
    ) -> None:
        """A person's write names a valid key and ids (kairox_core/inputs.py), and the
        session it names exists: the same rules on every surface."""
        if key is not None or scope != "session":
            if key is None:
                raise KairoxUserError(f"a {scope.value} memory needs a key (e.g. 'editor')")
            check_key(key)
        if workspace_id is not None:
            check_workspace_id(workspace_id)
        if session_id is not None:
            check_session_id(session_id)
            if self.events.get_session(session_id) is None:
                raise MemoryNotFoundError(
                    f"no session '{session_id}': a memory can only name a session that "
                    f"exists; `kairox sessions` lists them"
                )
        if scope == "workspace" and not workspace_id:
            raise KairoxUserError("a workspace memory needs a workspace id")
        if scope == "session" and not session_id:
            raise KairoxUserError("a session memory needs the id of an existing session")

    def _check_body(self, body: str) -> None:
        if not isinstance(body, str) or not body.strip():
            raise KairoxUserError("a memory body must not be empty")
        check_text(body, "the memory body")
        if len(body) > self.max_body_chars:
            raise KairoxUserError(
                f"a memory body may have at most {self.max_body_chars} characters "
                f"(this one has {len(body)}); shorten it or raise [memory] max_body_chars"
            )

    def _require_memory(self, memory_id: str) -> MemoryRecord:
        record = self.memories.get_by_id(memory_id)
        if record is None:
            raise MemoryNotFoundError(
                f"no memory with id '{memory_id}'; `kairox memory list` shows the ids"
            )
        return record

    def _require_pending(self, proposal_id: str) -> Proposal:
        proposal = self.get_proposal(proposal_id)
        if proposal is None:
            raise MemoryNotFoundError(
                f"no proposal with id '{proposal_id}'; `kairox memory pending` shows the ids"
            )
        if proposal.status != "pending":
            raise ProposalNotPendingError(
                f"proposal '{proposal_id}' is already {proposal.status}; only pending "
                f"proposals can be accepted or rejected"
            )
        return proposal

    def _pending_keyless(self, session_id: str, body: str) -> bool:
        return any(
            p.key is None and p.body == body
            for p in self.store.list(status="pending", session_id=session_id)
        )

    def _pending_for(self, scope: MemoryScope, owner: str, key: str | None) -> Proposal | None:
        if key is None:
            return None
        return self.store.pending_for(scope, owner, key)


def _replace(p: Proposal, **changes: Any) -> Proposal:
    import dataclasses

    return dataclasses.replace(p, **changes)


__all__ = [
    "ApprovalService",
    "MarkerLike",
    "Proposal",  # kept here for callers that import it from the approval flow
    "ProposalNotPendingError",
    "maintenance_session_id",
]
