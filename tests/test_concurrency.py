"""Several processes on one database file and one session: no lost or failed turn, one
compaction per stretch, and a killed compaction never blocks the next (issue 13)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kairox_core.events import (
    CompactionSummary,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionStarted,
    UserMessageAdded,
)
from kairox_core.facade import Kairox
from kairox_core.testing.multiprocess import config

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
    """Pairs of summaries over overlapping ranges where neither folds the other."""
    bad = []
    for a in summaries:
        for b in summaries:
            later = (a.seq or 0) < (b.seq or 0)
            overlap = a.first_seq <= b.last_seq and b.first_seq <= a.last_seq
            if later and overlap and a.seq not in b.folded_summaries:
                bad.append((a.seq or 0, b.seq or 0))
    return bad


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
