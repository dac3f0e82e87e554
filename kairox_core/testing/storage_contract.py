"""Contract tests every storage backend (``kairox_register_storage``) must pass.

A backend's suite subclasses ``StorageContract`` and implements ``make_storage``
(``kairox-core`` does so for the built-in SQLite storage in ``tests/test_storage.py``)::

    class TestMyStorage(StorageContract):
        def make_storage(self, tmp_path):
            return MyStorage(url_of_a_fresh_database)

Each test gets a fresh, empty database. The checks: the protocol's shape, seqs per
session, reads by range and type, atomic() across events/memories/proposals, the light
queries compaction and recall plan with, proposals' state changes (a decision changes a
pending proposal only and says whether it did: a second accept, reject or supersede is
refused with False), leases (one holder; expiry, renewal and takeover by the store's
``clock``, which the tests set to a ``ManualClock``), the retrieval index, and a whole
turn through ``Kairox`` on top of the backend.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kairox_core.capabilities import verify
from kairox_core.config import KairoxConfig
from kairox_core.events import (
    AssistantMessageCompleted,
    ContextCompactionCompleted,
    ContextCompactionStarted,
    Event,
    FactPinned,
    SessionStarted,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.markers import MemoryScope
from kairox_core.memory.records import Proposal
from kairox_core.retrieval.index import DocumentInput
from kairox_core.store.protocol import EventLog, ProposalStore, Storage


class ManualClock:
    """A clock a test moves by hand (``advance``): give it to a store as its ``clock``."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _turn(sid: str, turn: str, text: str, tokens: int = 5) -> list[Event]:
    return [
        UserMessageAdded(session_id=sid, turn_id=turn, text=text, tokens=tokens),
        AssistantMessageCompleted(session_id=sid, turn_id=turn, text=f"re: {text}", tokens=1),
    ]


def _proposal(pid: str, key: str = "diet", body: str = "vegetarian") -> Proposal:
    return Proposal(
        id=pid,
        scope=MemoryScope.USER,
        key=key,
        body=body,
        tainted=False,
        session_id="s1",
        workspace_id="w",
        turn_id="t1",
        raw="",
        created_at=time.time(),
    )


class StorageContract:
    """What ``Kairox`` relies on from a storage backend."""

    def make_storage(self, tmp_path: Path) -> Storage:
        raise NotImplementedError

    @pytest.fixture
    def storage(self, tmp_path: Path) -> Iterator[Storage]:
        s = self.make_storage(tmp_path)
        yield s
        s.close()

    def test_has_the_protocols_shape(self, storage: Storage) -> None:
        assert isinstance(storage, Storage)
        assert isinstance(storage.events, EventLog)
        assert isinstance(storage.proposals, ProposalStore)
        assert storage.name and storage.location

    def test_declared_capabilities_hold(self, storage: Storage) -> None:
        """What the storage, its long-term store and its index declare, they implement
        (kairox_core/capabilities.py: the check ``Kairox.open`` makes)."""
        verify(storage, f"storage '{storage.name}'")
        if storage.capabilities.longterm:
            verify(storage.longterm, f"storage '{storage.name}''s long-term store")
        index = storage.workspace_index(KairoxConfig(), "capabilities")
        try:
            verify(index, f"storage '{storage.name}''s workspace index")
        finally:
            index.close()

    def test_seqs_are_per_session_and_reads_filter(self, storage: Storage) -> None:
        log = storage.events
        stored = log.append_many([*_turn("a", "t1", "one"), *_turn("b", "t1", "uno")])
        assert [(e.session_id, e.seq) for e in stored] == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
        log.append(SessionStarted(session_id="c", workspace_id="w", profile="default"))
        assert log.last_seq("a") == 2 and log.last_seq("nobody") == 0
        assert [e.seq for e in log.read("a", first_seq=2)] == [2]
        assert [e.type for e in log.read("a", types=["UserMessageAdded"])] == ["UserMessageAdded"]
        assert log.read("a", types=[]) == []
        info = log.get_session("c")
        assert info is not None and info.workspace_id == "w" and info.profile == "default"
        assert {i.session_id for i in log.sessions()} == {"a", "b", "c"}
        assert [i.session_id for i in log.sessions(workspace_id="w")] == ["c"]

    def test_atomic_spans_events_memories_and_proposals(self, storage: Storage) -> None:
        with pytest.raises(RuntimeError), storage.atomic():
            storage.events.append_many(_turn("a", "t1", "lost"))
            storage.memories.put("user", "diet", "vegan")
            storage.proposals.insert(_proposal("p-lost"), "user")
            raise RuntimeError("undo all of it")
        assert storage.events.read("a") == []
        assert storage.memories.list("user") == []
        assert storage.proposals.get("p-lost") is None
        with storage.atomic(), storage.atomic():  # nests
            storage.events.append_many(_turn("a", "t1", "kept"))
        assert storage.events.last_seq("a") == 2

    def test_planning_queries(self, storage: Storage) -> None:
        log = storage.events
        log.append_many(_turn("s", "t1", "first", tokens=7))
        log.append(FactPinned(session_id="s", fact_id="f-1", text="keep"))
        log.append(
            ToolInvocationCompleted(
                session_id="s",
                turn_id="t2",
                tool_call_id="c",
                tool_name="look",
                arguments="{}",
                result="r",
                tokens=3,
            )
        )
        log.append_many(_turn("s", "t3", "third"))
        rows = log.conversation_rows("s")
        assert [(r.seq, r.type, r.turn_id) for r in rows][:2] == [
            (1, "UserMessageAdded", "t1"),
            (2, "AssistantMessageCompleted", "t1"),
        ]
        assert rows[0].tokens == 7 and [r.seq for r in rows] == [1, 2, 4, 5, 6]
        assert [r.seq for r in log.conversation_rows("s", [(1, 2)])] == [4, 5, 6]
        assert [r.seq for r in log.conversation_rows("s", [(4, 5)])] == [1, 2, 6]
        assert [r.seq for r in log.conversation_rows("s", first_seq=2, last_seq=4)] == [2, 4]
        assert log.conversation_seqs("s", None, 3) == [6, 5, 4]
        assert log.conversation_seqs("s", 4, 10) == [2, 1]
        assert [e.type for e in log.compaction_events("s")] == ["FactPinned"]
        assert log.compaction_events("s", after_seq=3) == []

    def test_history_rows(self, storage: Storage) -> None:
        """``event_rows.HISTORY_COLUMNS``: the rows history renders, in both directions;
        a stored count only under the scheme asked for."""
        log = storage.events
        log.append(
            UserMessageAdded(
                session_id="s",
                turn_id="t1",
                text="look é",
                attachments=({"kind": "file", "filename": "n.txt", "text": "x"},),
                tokens=9,
                token_counter="o200k_base+0",
            )
        )
        log.append(FactPinned(session_id="s", fact_id="f-1", text="keep"))
        log.append(
            ToolInvocationCompleted(
                session_id="s",
                turn_id="t1",
                tool_call_id="c",
                tool_name="look",
                arguments='{"q": 1}',
                result="found",
                tokens=5,
                token_counter="o200k_base+0",
            )
        )
        log.append_many(_turn("s", "t2", "second"))
        log.append_many(_turn("other", "t9", "elsewhere"))
        rows = log.history_rows("s", counter_key="o200k_base+0")
        assert [r[:4] for r in rows] == [
            (5, 1, "t2", None),
            (4, 0, "t2", None),
            (3, 2, "t1", 5),
            (1, 0, "t1", 9),
        ]
        user, tool = rows[3], rows[2]
        assert user[4] is not None and tool[4] is not None
        assert json.loads(user[4]) == [{"kind": "file", "filename": "n.txt", "text": "x"}]
        assert user[5] == "look é" and rows[1][4] is None and rows[1][5] == "second"
        assert json.loads(tool[4]) == ["c", "look", '{"q": 1}'] and tool[5] == "found"
        assert [r[3] for r in log.history_rows("s", counter_key="cl100k_base+0")] == [None] * 4
        assert [r[0] for r in log.history_rows("s", below=4, limit=1)] == [3]
        assert [r[0] for r in log.history_rows("s", above=1)] == [3, 4, 5]

    def test_history_rows_give_the_models_own_view_of_a_reply(self, storage: Storage) -> None:
        """A reply's ``model_text`` (its memory tags kept, issue 28) is what history
        renders; a reply without one renders its ``text``."""
        log = storage.events
        tag = '<memory scope="user" key="k">v</memory>'
        log.append(
            AssistantMessageCompleted(
                session_id="s", turn_id="t1", text="Noted.", model_text=f"Noted. {tag}"
            )
        )
        log.append(AssistantMessageCompleted(session_id="s", turn_id="t2", text="Plain."))
        assert [r[5] for r in log.history_rows("s")] == ["Plain.", f"Noted. {tag}"]
        (first,) = [e for e in log.read("s") if e.seq == 1]
        assert isinstance(first, AssistantMessageCompleted) and first.text == "Noted."

    def test_a_compaction_in_flight_is_seen_until_it_ends(self, storage: Storage) -> None:
        log = storage.events
        assert log.compaction_running("s") is None
        started = log.append(
            ContextCompactionStarted(
                session_id="s",
                compaction_id="c-1",
                first_seq=1,
                last_seq=1,
                strategy="x",
                trigger="manual",
            )
        )
        assert log.compaction_running("s") == started.seq
        log.append(ContextCompactionCompleted(session_id="s", compaction_id="c-1", summary_seq=1))
        assert log.compaction_running("s") is None

    def test_a_lease_has_one_holder_at_a_time(self, storage: Storage) -> None:
        leases = storage.leases
        first = leases.acquire("compaction:s", "c-1", ttl=60, note="run 1")
        assert first.ok and first.lease is not None and first.displaced is None
        assert first.lease.holder == "c-1" and first.lease.note == "run 1"
        refused = leases.acquire("compaction:s", "c-2", ttl=60)
        assert not refused.ok and refused.current is not None
        assert refused.current.holder == "c-1"
        assert leases.acquire("compaction:other", "c-2", ttl=60).ok  # names are apart
        assert leases.renew("compaction:s", "c-1", ttl=60)
        assert not leases.renew("compaction:s", "c-2", ttl=60)
        assert not leases.release("compaction:s", "c-2")
        assert leases.release("compaction:s", "c-1")
        assert leases.get("compaction:s") is None
        assert leases.acquire("compaction:s", "c-2", ttl=60).ok

    def test_an_expired_lease_is_taken_and_its_holder_reported(self, storage: Storage) -> None:
        leases = storage.leases
        assert leases.acquire("compaction:s", "c-1", ttl=-1, note="run 1").ok  # lapsed
        claim = leases.acquire("compaction:s", "c-2", ttl=60)
        assert claim.ok and claim.displaced is not None
        assert claim.displaced.holder == "c-1" and claim.displaced.note == "run 1"
        assert not leases.renew("compaction:s", "c-1", ttl=60)  # the old holder lost it
        current = leases.get("compaction:s")
        assert current is not None and current.holder == "c-2"

    def test_a_lease_lives_by_the_stores_clock(self, storage: Storage) -> None:
        """Expiry, renewal and takeover are decided by the store's ``clock`` (injected
        here): no test waits for a lease to lapse."""
        leases = storage.leases
        clock = leases.clock = ManualClock(1000.0)
        taken = leases.acquire("x", "c-1", ttl=10)
        assert taken.lease is not None
        assert (taken.lease.acquired_at, taken.lease.expires_at) == (1000.0, 1010.0)
        clock.advance(9.5)
        assert not leases.acquire("x", "c-2", ttl=10).ok  # still live
        assert leases.renew("x", "c-1", ttl=10)  # now until 1019.5
        clock.advance(9.0)
        assert not leases.acquire("x", "c-2", ttl=10).ok
        clock.advance(1.0)  # exactly at expiry (1019.5): dead
        claim = leases.acquire("x", "c-2", ttl=10, note="next")
        assert claim.ok and claim.lease is not None and claim.lease.expires_at == 1029.5
        assert claim.displaced is not None and claim.displaced.holder == "c-1"
        assert claim.displaced.expires_at == 1019.5
        assert not leases.renew("x", "c-1", ttl=10)  # the displaced holder lost it
        assert not leases.release("x", "c-1")
        own = leases.acquire("x", "c-2", ttl=10)  # re-acquiring one's own: a renewal
        assert own.ok and own.displaced is None

    def test_indexed_stretch_round_trips(self, storage: Storage) -> None:
        log = storage.events
        assert log.indexed_stretch("s") is None
        log.set_indexed_stretch("s", 5, 40)
        log.set_indexed_stretch("s", 0, 42)
        assert log.indexed_stretch("s") == (0, 42)
        log.set_indexed_stretch("s", 3, 41)  # a slower process catching up: never narrows
        assert log.indexed_stretch("s") == (0, 42)

    def test_proposals_change_state_once(self, storage: Storage) -> None:
        store = storage.proposals
        store.insert(_proposal("p1"), "user")
        found = store.pending_for(MemoryScope.USER, "user", "diet")
        assert found is not None and found.id == "p1" and found.status == "pending"
        store.supersede("p1", by="p2", at=time.time())
        assert store.pending_for(MemoryScope.USER, "user", "diet") is None
        store.insert(_proposal("p2", body="vegan"), "user")
        assert store.accept("p2", at=time.time(), memory_id="m-1", final_body="vegan!")
        assert not store.accept("p2", at=time.time(), memory_id="m-2", final_body="x")
        accepted = store.get("p2")
        assert accepted is not None and accepted.status == "accepted"
        assert accepted.memory_id == "m-1" and accepted.final_body == "vegan!"
        store.insert(_proposal("p3", key="city", body="Oslo"), "user")
        store.reject("p3", at=time.time(), reason="wrong")
        rejected = store.get("p3")
        assert rejected is not None and rejected.reason == "wrong"
        assert [p.id for p in store.list()] == ["p1", "p2", "p3"]
        assert [p.id for p in store.list(status="superseded")] == ["p1"]
        assert store.list(session_id="elsewhere") == []

    def test_proposals_by_turn(self, storage: Storage) -> None:
        """``for_turns``: what history reads to render a reply's tags as decided."""
        store = storage.proposals
        for pid, turn in (("p1", "t1"), ("p2", "t2"), ("p3", "t1")):
            store.insert(dataclasses.replace(_proposal(pid, key=pid), turn_id=turn), "user")
        store.insert(dataclasses.replace(_proposal("p4", key="p4"), session_id="s2"), "user")
        assert [p.id for p in store.for_turns("s1", ["t1", "t1"])] == ["p1", "p3"]
        assert [p.id for p in store.for_turns("s1", ["t2", "t9", "t1"])] == ["p1", "p2", "p3"]
        assert store.for_turns("s1", []) == [] and store.for_turns("s2", ["t2"]) == []

    def test_a_decided_proposal_stays_decided(self, storage: Storage) -> None:
        """Every decision is taken once: a second decision of any kind (another window,
        another host) changes nothing and says so (False); the first one stands."""
        store = storage.proposals
        store.insert(_proposal("p1"), "user")
        assert store.reject("p1", at=1.0, reason="no")
        assert not store.reject("p1", at=2.0, reason="again")
        assert not store.accept("p1", at=3.0, memory_id="m-1", final_body="x")
        assert not store.supersede("p1", by="p9", at=4.0)
        rejected = store.get("p1")
        assert rejected is not None and rejected.status == "rejected"
        assert (rejected.resolved_at, rejected.reason) == (1.0, "no")
        assert rejected.memory_id is None and rejected.superseded_by is None
        store.insert(_proposal("p2", key="city", body="Oslo"), "user")
        assert store.accept("p2", at=5.0, memory_id="m-2", final_body="Oslo")
        assert not store.reject("p2", at=6.0, reason="late")
        assert not store.accept("p2", at=7.0, memory_id="m-3", final_body="Bergen")
        accepted = store.get("p2")
        assert accepted is not None and accepted.status == "accepted"
        assert (accepted.resolved_at, accepted.reason, accepted.memory_id) == (5.0, None, "m-2")
        store.insert(_proposal("p3", key="pet", body="cat"), "user")
        assert store.supersede("p3", by="p4", at=8.0)
        assert not store.accept("p3", at=9.0, memory_id="m-4", final_body="cat")
        assert not store.reject("p3", at=9.0, reason="gone")
        superseded = store.get("p3")
        assert superseded is not None and superseded.status == "superseded"
        assert (superseded.superseded_by, superseded.resolved_at) == ("p4", 8.0)
        assert not store.reject("nobody", at=1.0, reason=None)
        assert not store.accept("nobody", at=1.0, memory_id="m", final_body="x")

    def test_rejecting_a_decided_proposal_through_kairox_is_refused(self, storage: Storage) -> None:
        from kairox_core.facade import Kairox
        from kairox_core.memory.approvals import ProposalNotPendingError

        kx = Kairox(storage, KairoxConfig())
        session = kx.session(workspace="w")
        result = session.run_turn_sync(
            "I am vegetarian", 'Noted. <memory scope="user" key="diet">vegetarian</memory>'
        )
        proposal = result.proposals[0]
        kx.approvals.accept(proposal.id)
        with pytest.raises(ProposalNotPendingError):
            kx.approvals.reject(proposal.id, reason="changed my mind")
        decided = storage.proposals.get(proposal.id)
        assert decided is not None and decided.status == "accepted" and decided.reason is None
        rejected = [e for e in kx.events(session.id) if e.type == "MemoryRejected"]
        assert rejected == []
        kx.close()

    def test_the_retrieval_index_keeps_spaces_apart(self, storage: Storage) -> None:
        config = KairoxConfig()
        docs = storage.workspace_index(config, "w1")
        other = storage.workspace_index(config, "w2")
        docs.add_documents(
            [DocumentInput(doc_id="a", text="The launch moved to Thursday.", doc_type="note")]
        )
        hits = docs.search("launch Thursday", 3, "keyword")
        assert [h.doc_id for h in hits] == ["a"]
        assert other.search("launch Thursday", 3, "keyword") == []

    def test_a_whole_turn_through_kairox(self, storage: Storage) -> None:
        from kairox_core.facade import Kairox

        kx = Kairox(storage, KairoxConfig())
        session = kx.session(workspace="w")
        result = session.run_turn_sync(
            "I am vegetarian", 'Noted. <memory scope="user" key="diet">vegetarian</memory>'
        )
        assert result.text == "Noted." and [p.key for p in result.proposals] == ["diet"]
        kx.approvals.accept(result.proposals[0].id)
        assert [m.body for m in kx.memories.list("user")] == ["vegetarian"]
        assert [e.type for e in kx.events(session.id)][:2] == ["SessionStarted", "UserMessageAdded"]
        kx.close()
