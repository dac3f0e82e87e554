"""Memory store throughput: accepted writes/s and keyed reads/s, as JSON.

Baselines measured in the same run on the same kind of file (WAL, same pragmas, one
transaction per write): a bare ``INSERT ... ON CONFLICT DO UPDATE`` and a bare keyed
``SELECT``. The ratios say what the store's bookkeeping (history, provenance, records)
costs over raw SQLite. Also timed: the full approval path (propose + accept, with its
events and proposal row) per second.

    python benchmarks/bench_memory_store.py [--n 2000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kairox_core.memory.approvals import ApprovalService
from kairox_core.store import Database, EventStore, SqliteMemoryStore
from kairox_core.store.connection import connect, transaction


@dataclass(frozen=True)
class Marker:
    scope: str
    key: str | None
    body: str
    raw: str = ""


def rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def raw_baseline(path: Path, n: int) -> tuple[float, float, float]:
    conn = connect(path, vec=False)
    conn.execute(
        "CREATE TABLE kv (scope TEXT, owner TEXT, key TEXT, body TEXT, "
        "updated_at REAL, PRIMARY KEY (scope, owner, key))"
    )
    sql = (
        "INSERT INTO kv VALUES (?, ?, ?, ?, ?) ON CONFLICT (scope, owner, key) "
        "DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at"
    )
    t0 = time.perf_counter()
    for i in range(n):
        with transaction(conn):
            conn.execute(sql, ("workspace", "w1", f"key{i}", f"body {i}", time.time()))
    new = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(n):
        with transaction(conn):
            conn.execute(sql, ("workspace", "w1", f"key{i}", f"body {i} v2", time.time()))
    replace = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(n):
        conn.execute(
            "SELECT * FROM kv WHERE scope = ? AND owner = ? AND key = ?",
            ("workspace", "w1", f"key{i}"),
        ).fetchone()
    reads = time.perf_counter() - t0
    conn.close()
    return rate(n, new), rate(n, replace), rate(n, reads)


def store_run(path: Path, n: int) -> tuple[float, float, float]:
    store = SqliteMemoryStore(path)
    t0 = time.perf_counter()
    for i in range(n):
        store.put("workspace", f"key{i}", f"body {i}", workspace_id="w1")
    new = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(n):
        store.put("workspace", f"key{i}", f"body {i} v2", workspace_id="w1")
    replace = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(n):
        record = store.get("workspace", f"key{i}", workspace_id="w1")
        assert record is not None
    reads = time.perf_counter() - t0
    store.close()
    return rate(n, new), rate(n, replace), rate(n, reads)


def approval_run(path: Path, n: int) -> float:
    db = Database.open(path)
    events, memories = EventStore(db), SqliteMemoryStore(db)
    approvals = ApprovalService(events, memories)
    t0 = time.perf_counter()
    for i in range(n):
        p = approvals.propose("s1", "w1", f"t{i}", Marker("workspace", f"key{i}", f"b{i}"))
        assert p is not None
        approvals.accept(p.id)
    seconds = time.perf_counter() - t0
    events.close()
    memories.close()
    db.release()
    return rate(n, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="operations per measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_new, base_replace, base_reads = raw_baseline(Path(tmp) / "raw.db", args.n)
        new, replace, reads = store_run(Path(tmp) / "store.db", args.n)
        approved = approval_run(Path(tmp) / "approvals.db", args.n)
    print(
        json.dumps(
            {
                "benchmark": "memory_store",
                "n": args.n,
                "accepted_writes_per_s": {"new_key": new, "replace_body": replace},
                "keyed_reads_per_s": reads,
                "propose_and_accept_per_s": approved,
                "baseline_raw_sqlite": {
                    "upsert_new_per_s": base_new,
                    "upsert_replace_per_s": base_replace,
                    "keyed_select_per_s": base_reads,
                },
                "ratio_to_raw": {
                    "new_key_writes": round(new / base_new, 3),
                    "replace_writes": round(replace / base_replace, 3),
                    "keyed_reads": round(reads / base_reads, 3),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
