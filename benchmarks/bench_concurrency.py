"""Benchmark: N processes on one database file and one session (issue 13 item 1).

Each process (``kairox_core.testing.multiprocess turns``) resumes the same session and
runs T turns with a small window, so the turn-end compaction check and recall's
catch-up run on most turns, all processes at once. Reported: turns that failed (and
their errors), user messages recorded (none lost), summaries, pairs of summaries that
compacted the same stretch (a later one over an earlier one's range without folding
it), runs started and never ended, and wall time. The goal: zero failed, zero lost,
zero overlapping pairs, zero unended runs, for any N.

    python benchmarks/bench_concurrency.py [--procs 2,4] [--turns 40] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kairox_core.events import (
    CompactionSummary,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionStarted,
    UserMessageAdded,
)
from kairox_core.facade import Kairox
from kairox_core.testing.multiprocess import config


def overlapping(summaries: list[CompactionSummary]) -> int:
    """Pairs where a later summary covers an earlier one's range without absorbing it
    (directly or through the summaries it folds)."""
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

    bad = 0
    for b in summaries:
        gone = absorbed(b)
        for a in summaries:
            later = (a.seq or 0) < (b.seq or 0)
            overlap = a.first_seq <= b.last_seq and b.first_seq <= a.last_seq
            bad += later and overlap and (a.seq or 0) not in gone
    return bad


def run(procs: int, turns: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="kx-bench-conc-"))
    db = home / "shared.db"
    env = {**os.environ, "HOME": str(home)}
    kx = Kairox.open(db, config())
    sid = kx.session(workspace="w").id
    kx.close()
    started = time.perf_counter()
    child_cmd = [sys.executable, "-m", "kairox_core.testing.multiprocess", "turns"]
    children = [
        subprocess.Popen(
            [*child_cmd, str(db), sid, str(turns), f"p{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(procs)
    ]
    results = []
    for child in children:
        out, err = child.communicate(timeout=1800)
        if child.returncode:
            raise SystemExit(f"a child failed:\n{err[-3000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    seconds = time.perf_counter() - started
    kx = Kairox.open(db, config())
    events = kx.events(sid)
    kx.close()
    summaries = [e for e in events if isinstance(e, CompactionSummary)]
    opened = {e.compaction_id for e in events if isinstance(e, ContextCompactionStarted)}
    ended = {
        e.compaction_id
        for e in events
        if isinstance(e, ContextCompactionCompleted | ContextCompactionFailed)
    }
    errors: dict[str, int] = {}
    for r in results:
        for f in r["failed"]:
            errors[f[:100]] = errors.get(f[:100], 0) + 1
    return {
        "procs": procs,
        "turns": procs * turns,
        "failed": sum(len(r["failed"]) for r in results),
        "recorded": sum(isinstance(e, UserMessageAdded) for e in events),
        "summaries": len(summaries),
        "overlapping_pairs": overlapping(summaries),
        "unended_runs": len(opened - ended),
        "errors": errors,
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--procs", default="2,4")
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [run(int(n), args.turns) for n in args.procs.split(",")]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{'procs':>5} {'turns':>5} {'failed':>6} {'recorded':>8} {'summaries':>9} "
        f"{'overlap':>7} {'unended':>7} {'s':>6}  errors"
    )
    for r in rows:
        print(
            f"{r['procs']:>5} {r['turns']:>5} {r['failed']:>6} {r['recorded']:>8} "
            f"{r['summaries']:>9} {r['overlapping_pairs']:>7} {r['unended_runs']:>7} "
            f"{r['seconds']:>6}  {json.dumps(r['errors'])}"
        )


if __name__ == "__main__":
    main()
