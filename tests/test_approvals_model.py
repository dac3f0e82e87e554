"""Model-based test of the approval flow: pending and accepted state against a dict model,
with restarts in between, and the event log always in the documented order."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kairox_core.events import MemoryAccepted, MemoryProposed, MemoryRejected
from kairox_core.memory.approvals import ApprovalService
from kairox_core.store import Database, EventStore, SqliteMemoryStore

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Marker:
    """The attributes ``propose`` reads from ``kairox_core.markers.MemoryMarker``."""

    scope: str
    key: str | None
    body: str
    raw: str = ""


SCOPES = st.sampled_from(["session", "user", "workspace"])
KEYS = st.sampled_from(["a", "b"])
BODIES = st.sampled_from(["x", "y", "z"])
WORKSPACES = st.sampled_from(["w1", "w2"])
SESSION_OF = {"w1": "s1", "w2": "s2"}
Slot = tuple[str, str, str]  # scope, owner, key


class ApprovalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self._open()
        self.accepted: dict[Slot, str] = {}
        self.pending: dict[Slot, tuple[str, str]] = {}  # slot -> (proposal id, body)
        self.slot_of: dict[str, tuple[Slot, str]] = {}  # proposal id -> (slot, workspace)

    def _open(self) -> None:
        self.db = Database.open(self.dir / "kx.db")
        self.events = EventStore(self.db)
        self.memories = SqliteMemoryStore(self.db)
        self.approvals = ApprovalService(self.events, self.memories)

    def _close(self) -> None:
        self.events.close()
        self.memories.close()
        self.db.release()

    def _slot(self, scope: str, ws: str, key: str) -> Slot:
        owner = {"session": SESSION_OF[ws], "user": "user", "workspace": ws}[scope]
        return scope, owner, key

    @rule(scope=SCOPES, ws=WORKSPACES, key=KEYS, body=BODIES, tainted=st.booleans())
    def propose(self, scope: str, ws: str, key: str, body: str, tainted: bool) -> None:
        slot = self._slot(scope, ws, key)
        p = self.approvals.propose(
            SESSION_OF[ws], ws, "t", Marker(scope, key, body), tainted=tainted
        )
        if self.accepted.get(slot) == body:
            assert p is None
            return
        if scope == "session" and not tainted:  # accepted at once; a tainted one waits
            assert p is not None and p.status == "accepted"
            self.accepted[slot] = body
            self.pending.pop(slot, None)  # superseded
            return
        if slot in self.pending and self.pending[slot][1] == body:
            assert p is None
            return
        assert p is not None and p.status == "pending" and p.tainted == tainted
        previous = self.pending.get(slot)
        assert p.supersedes == (previous[0] if previous else None)
        self.pending[slot] = (p.id, body)
        self.slot_of[p.id] = (slot, ws)

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data(), edit=st.one_of(st.none(), BODIES))
    def accept(self, data: st.DataObject, edit: str | None) -> None:
        slot = data.draw(st.sampled_from(sorted(self.pending)))
        pid, body = self.pending.pop(slot)
        record = self.approvals.accept(pid, body=edit)
        assert record.body == (edit or body)
        self.accepted[slot] = record.body

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def reject(self, data: st.DataObject) -> None:
        slot = data.draw(st.sampled_from(sorted(self.pending)))
        pid, _ = self.pending.pop(slot)
        assert self.approvals.reject(pid, reason="no").status == "rejected"

    @rule(scope=st.sampled_from(["user", "workspace"]), ws=WORKSPACES, key=KEYS, body=BODIES)
    def remember(self, scope: str, ws: str, key: str, body: str) -> None:
        slot = self._slot(scope, ws, key)
        record = self.approvals.remember(scope, key, body, workspace_id=ws)
        assert record.body == body
        if self.accepted.get(slot) != body:
            self.pending.pop(slot, None)  # a person's own write supersedes the proposal
        self.accepted[slot] = body

    @rule()
    def restart(self) -> None:
        self._close()
        self._open()

    @invariant()
    def state_matches_the_model(self) -> None:
        got = {p.id: p.body for p in self.approvals.pending()}
        assert got == {pid: body for pid, body in self.pending.values()}
        for (scope, owner, key), body in self.accepted.items():
            ws = owner if scope == "workspace" else None
            sess = owner if scope == "session" else None
            rec = self.memories.get(scope, key, workspace_id=ws, session_id=sess)
            assert rec is not None and rec.body == body
        assert len(self.memories.list()) == len(self.accepted)

    @invariant()
    def events_come_in_the_documented_order(self) -> None:
        for session in ("s1", "s2", "_memory:w1", "_memory:w2"):
            proposed: set[str] = set()
            decided: set[str] = set()
            for event in self.events.read(session):
                if isinstance(event, MemoryProposed):
                    proposed.add(event.proposal_id)
                elif isinstance(event, MemoryAccepted | MemoryRejected):
                    assert event.proposal_id in proposed  # proposed first, same session
                    assert event.proposal_id not in decided  # decided once
                    decided.add(event.proposal_id or "")

    def teardown(self) -> None:
        self._close()
        shutil.rmtree(self.dir, ignore_errors=True)


ApprovalMachine.TestCase.settings = settings(max_examples=30, stateful_step_count=20, deadline=None)
TestApprovalModel = ApprovalMachine.TestCase
