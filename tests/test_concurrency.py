"""Several processes on one database file and one session: no lost or failed turn, one
compaction per stretch, and a killed compaction never blocks the next (issue 13)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kairox_core import hookimpl
from kairox_core.events import (
    CompactionSummary,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    UserMessageAdded,
)
from kairox_core.facade import Kairox
from kairox_core.testing.multiprocess import HANG_READY, config

TIMEOUT = 240


def child(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "KAIROX_STRICT_PLUGINS": "0"}
    return subprocess.Popen(
        [sys.executable, "-m", "kairox_core.testing.multiprocess", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def run_processes(db: Path, sid: str, procs: int, turns: int) -> list[dict[str, object]]:
    running = [child("turns", str(db), sid, str(turns), f"p{i}") for i in range(procs)]
    results = []
    for p in running:
        out, err = p.communicate(timeout=TIMEOUT)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def overlapping(summaries: list[CompactionSummary]) -> list[tuple[int, int]]:
    """Pairs (a, b) of summaries over overlapping ranges where b, the later, does not
    replace a (directly or through the summaries it folds): two runs compacted the
    same stretch."""
    by_seq = {s.seq or 0: s for s in summaries}

    def absorbed(s: CompactionSummary) -> set[int]:
        out: set[int] = set()
        todo = list(s.folded_summaries)
        while todo:
            seq = todo.pop()
            if seq not in out:
                out.add(seq)
                todo += list(by_seq[seq].folded_summaries) if seq in by_seq else []
        return out

    bad = []
    for b in summaries:
        gone = absorbed(b)
        for a in summaries:
            later = (a.seq or 0) < (b.seq or 0)
            overlap = a.first_seq <= b.last_seq and b.first_seq <= a.last_seq
            if later and overlap and (a.seq or 0) not in gone:
                bad.append((a.seq or 0, b.seq or 0))
    return bad


@pytest.mark.slow
@pytest.mark.parametrize("procs", [2, 3])
def test_processes_on_one_session_lose_and_fail_no_turn(
    kairox_home: Path, tmp_path: Path, procs: int
) -> None:
    db = tmp_path / "shared.db"
    kx = Kairox.open(db, config())
    sid = kx.session(workspace="w").id
    kx.close()
    turns = 12
    results = run_processes(db, sid, procs, turns)
    assert [r["failed"] for r in results] == [[]] * procs
    assert sum(int(r["ok"]) for r in results) == procs * turns  # type: ignore[call-overload]
    kx = Kairox.open(db, config())
    try:
        events = kx.events(sid)
        users = [e for e in events if isinstance(e, UserMessageAdded)]
        assert len(users) == procs * turns
        summaries = [e for e in events if isinstance(e, CompactionSummary)]
        assert summaries and overlapping(summaries) == []
        started = {e.compaction_id for e in events if isinstance(e, ContextCompactionStarted)}
        ended = {
            e.compaction_id
            for e in events
            if isinstance(e, ContextCompactionCompleted | ContextCompactionFailed)
        }
        assert started == ended
    finally:
        kx.close()


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def plant_lease(db: Path, name: str, holder: str, pid: int, host: str, ttl: float) -> None:
    from kairox_core.store.connection import connect, transaction

    conn = connect(db, vec=False)
    with transaction(conn):
        conn.execute(
            "INSERT INTO leases(name, holder, pid, host, note, acquired_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (name, holder, pid, host, holder, time.time(), time.time() + ttl),
        )
    conn.close()


def test_a_dead_holder_is_displaced_at_once_another_host_only_when_expired(
    kairox_home: Path, tmp_path: Path
) -> None:
    from kairox_core.store.leases import HOST
    from kairox_core.store.sqlite_storage import SqliteStorage

    db = tmp_path / "kx.db"
    storage = SqliteStorage(str(db))
    plant_lease(db, "a", "c-dead", dead_pid(), HOST, ttl=600)
    plant_lease(db, "b", "c-far", 1, "another-host", ttl=600)  # pid 1 there: unknowable
    plant_lease(db, "c", "c-far-lapsed", 1, "another-host", ttl=-1)
    try:
        claim = storage.leases.acquire("a", "c-new", ttl=30)
        assert claim.ok and claim.displaced is not None and claim.displaced.holder == "c-dead"
        refused = storage.leases.acquire("b", "c-new", ttl=30)
        assert not refused.ok and refused.current is not None
        assert refused.current.host == "another-host"
        lapsed = storage.leases.acquire("c", "c-new", ttl=30)
        assert lapsed.ok and lapsed.displaced is not None
    finally:
        storage.close()


RACE = """
import sys, time
from kairox_core.store.sqlite_storage import SqliteStorage
s = SqliteStorage(sys.argv[1])
while time.time() < float(sys.argv[2]):
    time.sleep(0.001)
print(int(s.leases.acquire("compaction:s", sys.argv[3], ttl=60).ok), flush=True)
sys.stdin.read()  # alive until every racer has tried: a dead winner may be displaced
"""


@pytest.mark.slow
def test_processes_racing_for_a_lease_leave_one_holder(tmp_path: Path) -> None:
    from kairox_core.store.sqlite_storage import SqliteStorage

    db = tmp_path / "kx.db"
    SqliteStorage(str(db)).close()  # schema first, so the racers only race the claim
    start = str(time.time() + 1.5)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(db), start, f"c-{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    try:
        won = [int(p.stdout.readline().strip() or 0) for p in racers if p.stdout]
    finally:
        for p in racers:
            p.communicate(timeout=TIMEOUT)
    assert sorted(won) == [0, 0, 0, 1]


@pytest.mark.slow
def test_kill_9_during_a_compaction_is_closed_by_the_next_turn(
    kairox_home: Path, tmp_path: Path
) -> None:
    db = tmp_path / "kx.db"
    kx = Kairox.open(db, config(enabled=False))
    session = kx.session(workspace="w")
    sid = session.id
    for i in range(6):
        session.run_turn_sync(f"question {i} about the garden and spring", f"answer {i}")
    kx.close()
    hung = child("hang", str(db), sid, str(tmp_path / "ready"))
    assert hung.stdout is not None
    # its lines until it is inside the compaction (or it exits: end of its output)
    if not any(line.strip() == HANG_READY for line in hung.stdout):
        pytest.fail(f"the child never entered the compaction: {hung.communicate()[1][-2000:]}")
    hung.send_signal(signal.SIGKILL)
    hung.communicate(timeout=TIMEOUT)

    kx = Kairox.open(db, config())
    try:
        started = [e for e in kx.events(sid) if isinstance(e, ContextCompactionStarted)]
        assert [e.trigger for e in started] == ["manual"]  # the killed run, never ended
        outcome = kx.compact(sid)
        assert outcome.ok, outcome.reason
        events = kx.events(sid)
        failed = [e for e in events if isinstance(e, ContextCompactionFailed)]
        assert [e.compaction_id for e in failed] == [started[0].compaction_id]
        assert f"pid {hung.pid}" in failed[0].reason and "died" in failed[0].reason
        assert not [e for e in events if isinstance(e, ContextCompactionSkipped)]
        assert [e for e in events if isinstance(e, CompactionSummary)]
    finally:
        kx.close()


@pytest.mark.slow
def test_a_heartbeat_keeps_a_short_lease_while_the_run_lives(tmp_path: Path) -> None:
    from kairox_core.store.leases import Heartbeat
    from kairox_core.store.sqlite_storage import SqliteStorage
    from kairox_core.testing.storage_contract import ManualClock

    storage = SqliteStorage(str(tmp_path / "kx.db"))
    clock = storage.leases.clock = ManualClock(1000.0)
    try:
        assert storage.leases.acquire("x", "c-1", ttl=1.5).ok
        with Heartbeat(storage.leases, "x", "c-1", 1.5, interval=0.01) as beat:
            for _ in range(4):  # over two lease lengths, a second at a time
                clock.advance(1.0)
                assert beat.wait_renewals(beat.renewals + 1)
                assert not storage.leases.acquire("x", "c-2", ttl=1.5).ok
        clock.advance(1.6)  # no more renewals: it lapses
        assert storage.leases.acquire("x", "c-2", ttl=1.5).ok
    finally:
        storage.close()


class Stalled:
    """Stalls past its lease: meanwhile another process displaces it and takes over."""

    kx: Kairox | None = None

    def summarize(self, request: object) -> object:
        from kairox_core.compaction.base import CompactionOutput

        assert Stalled.kx is not None
        leases = Stalled.kx.storage.leases
        sid = Stalled.kx.storage.events.sessions()[0].session_id
        current = leases.get(f"compaction:{sid}")
        assert current is not None
        leases.renew(current.name, current.holder, ttl=-1)  # it lapsed while we stalled
        assert leases.acquire(current.name, "c-other", ttl=60).ok
        return CompactionOutput("a summary nobody may store")


class StalledPlugin:
    @hookimpl
    def kairox_register_compaction_strategies(self, register: Any) -> None:
        register("stalled", lambda **kw: Stalled())


def test_a_run_displaced_while_it_stalled_stores_nothing(
    kairox_home: Path, tmp_path: Path, register_plugin: Any
) -> None:
    register_plugin(StalledPlugin(), "test-stalled")
    kx = Kairox.open(tmp_path / "kx.db", config("stalled", enabled=False))
    Stalled.kx = kx
    try:
        session = kx.session(workspace="w")
        for i in range(4):
            session.run_turn_sync(f"question {i} about the garden", f"answer {i}")
        outcome = kx.compact(session.id)
        assert not outcome.ok and "lease" in (outcome.reason or "")
        events = kx.events(session.id)
        assert not [e for e in events if isinstance(e, CompactionSummary)]
        failed = [e for e in events if isinstance(e, ContextCompactionFailed)]
        assert len(failed) == 1 and "another process took over" in failed[0].reason
        current = kx.storage.leases.get(f"compaction:{session.id}")
        assert current is not None and current.holder == "c-other"  # not released by us
    finally:
        kx.close()
