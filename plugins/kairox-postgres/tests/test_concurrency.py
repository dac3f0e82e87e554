"""Many processes on one session, one proposal, one lease: a real server, real processes."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections import Counter
from typing import Any

from kairox_core.compaction.compactor import lease_name
from kairox_core.config import KairoxConfig
from kairox_core.facade import Kairox
from kairox_core.testing.storage_contract import ManualClock
from kairox_postgres.storage import PostgresStorage

WRITERS = 8
TURNS = int(os.environ.get("KAIROX_PG_TURNS", "25"))  # the 200: set it for a long run


def _config() -> KairoxConfig:
    """The defaults: workspace retrieval and recall (every turn indexed) on PostgreSQL too."""
    return KairoxConfig()


def _turns(url: str, session_id: str, worker: int, turns: int, start: Any) -> tuple[int, int]:
    """Run ``turns`` whole turns on the shared session; (done, failed)."""
    done = failed = 0
    with Kairox(PostgresStorage(url, max_connections=2), _config()) as kx:
        session = kx.session(workspace="w", session_id=session_id)
        start.wait()
        for i in range(turns):
            try:
                session.run_turn_sync(f"w{worker} turn {i}", f"reply {worker}/{i}")
                done += 1
            except Exception:
                failed += 1
    return done, failed


def _approve(url: str, proposal_id: str, start: Any) -> str:
    from kairox_core.memory.approvals import ProposalNotPendingError

    with Kairox(PostgresStorage(url, max_connections=1), _config()) as kx:
        start.wait()
        try:
            kx.approvals.accept(proposal_id)
            return "won"
        except ProposalNotPendingError:
            return "lost"


def _claim(url: str, holder: str, start: Any) -> bool:
    storage = PostgresStorage(url, max_connections=1)
    try:
        start.wait()
        return storage.leases.acquire(lease_name("s"), holder, ttl=60).ok
    finally:
        storage.close()


def _pool(n: int) -> tuple[Any, Any]:
    ctx = mp.get_context("spawn")  # a clean interpreter each: no pool inherited by fork
    manager = ctx.Manager()
    return ctx.Pool(n), manager


def test_writers_on_one_session_lose_and_duplicate_nothing(pg_url: str) -> None:
    with Kairox(PostgresStorage(pg_url), _config()) as kx:
        sid = kx.session(workspace="w").id  # SessionStarted, before anyone writes turns
    pool, manager = _pool(WRITERS)
    start = manager.Barrier(WRITERS)
    with pool, manager:
        results = pool.starmap(_turns, [(pg_url, sid, w, TURNS, start) for w in range(WRITERS)])
    assert [f for _, f in results] == [0] * WRITERS
    assert sum(d for d, _ in results) == WRITERS * TURNS
    storage = PostgresStorage(pg_url)
    try:
        events = storage.events.read(sid)
        seqs = [e.seq for e in events]
        assert seqs == list(range(1, len(events) + 1))  # none lost, none duplicated, in order
        prompts = [e.text for e in events if e.type == "UserMessageAdded"]  # type: ignore[attr-defined]
        assert len(prompts) == len(set(prompts)) == WRITERS * TURNS
        completed = Counter(e.type for e in events)["AssistantMessageCompleted"]
        assert completed == WRITERS * TURNS
        info = storage.events.get_session(sid)
        assert info is not None and info.last_seq == len(events) == info.event_count
    finally:
        storage.close()


def test_racing_approvals_decide_once(pg_url: str) -> None:
    with Kairox(PostgresStorage(pg_url), _config()) as kx:
        session = kx.session(workspace="w")
        result = session.run_turn_sync(
            "I am vegetarian", 'Noted. <memory scope="user" key="diet">vegetarian</memory>'
        )
        (proposal,) = result.proposals
    pool, manager = _pool(WRITERS)
    start = manager.Barrier(WRITERS)
    with pool, manager:
        outcomes = pool.starmap(_approve, [(pg_url, proposal.id, start)] * WRITERS)
    assert sorted(outcomes) == ["lost"] * (WRITERS - 1) + ["won"]
    with Kairox(PostgresStorage(pg_url), _config()) as kx:
        accepted = [e for e in kx.events(session.id) if e.type == "MemoryAccepted"]
        assert len(accepted) == 1
        assert [h.body for h in kx.memories.history("user", "diet")] == ["vegetarian"]
        decided = kx.storage.proposals.get(proposal.id)
        assert decided is not None and decided.status == "accepted"


def test_one_compaction_lease_per_session(pg_url: str) -> None:
    PostgresStorage(pg_url).close()  # migrate once, before the race
    pool, manager = _pool(WRITERS)
    start = manager.Barrier(WRITERS)
    with pool, manager:
        won = pool.starmap(_claim, [(pg_url, f"h{i}", start) for i in range(WRITERS)])
    assert sum(won) == 1


def test_a_crashed_holder_blocks_only_until_its_lease_expires(pg_url: str) -> None:
    storage = PostgresStorage(pg_url)
    leases, name = storage.leases, lease_name("s")
    clock = leases.clock = ManualClock(1000.0)
    try:
        assert leases.acquire(name, "crashed", ttl=0.2).ok
        refused = leases.acquire(name, "next", ttl=60)
        assert not refused.ok and refused.current is not None
        assert refused.current.holder == "crashed"
        assert leases.acquire(name, "crashed", ttl=0.2).ok  # renewing one's own
        clock.advance(0.3)
        taken = leases.acquire(name, "next", ttl=60)
        assert taken.ok and taken.displaced is not None and taken.displaced.holder == "crashed"
        assert not leases.release(name, "crashed")
        assert leases.release(name, "next")
        assert leases.acquire(name, "third", ttl=60).ok
        assert leases.acquire(lease_name("other"), "fourth", ttl=60).ok  # sessions apart
    finally:
        storage.close()


def test_concurrent_batches_over_the_same_sessions_do_not_deadlock(pg_url: str) -> None:
    import threading

    from kairox_core.events import UserMessageAdded

    storage = PostgresStorage(pg_url, max_connections=2)
    errors: list[BaseException] = []

    def write(order: list[str]) -> None:
        try:
            for i in range(30):
                storage.events.append_many(
                    [UserMessageAdded(session_id=s, turn_id=f"t{i}", text="x") for s in order]
                )
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(["a", "b"],)),
        threading.Thread(target=write, args=(["b", "a"],)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        for sid in ("a", "b"):
            assert [e.seq for e in storage.events.read(sid)] == list(range(1, 61))
    finally:
        storage.close()
