"""Retrieval overhead at 100k chunks: the index's queries vs the raw engine queries.

Builds a WorkspaceRagIndex of N synthetic one-chunk documents (hashing backend), then
times, interleaved in the same run, ``index.search(mode="vector"|"keyword")`` against
the raw sqlite-vec KNN and FTS5 bm25 queries it wraps (same tables), and against
standalone plain tables holding the same data. Goal: ratio <= 1.3. Also reports
indexing throughput (chunks/s).

    python benchmarks/bench_retrieval.py [--chunks 100000] [--queries 40] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

GOAL = 1.3


def vocabulary(rng: random.Random, size: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


def documents(n: int, seed: int = 7) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    vocab = vocabulary(rng, 30_000)
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(vocab))))  # Zipf-like
    docs = [" ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(30, 60))) for _ in range(n)]
    return docs, vocab


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--db", type=Path, default=None, help="reuse an index file")
    parser.add_argument(
        "--only",
        choices=("vector", "keyword"),
        default=None,
        help="time only one family of queries",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from kairox_core.retrieval.embeddings import HashingEmbedding
    from kairox_core.retrieval.fts import fts_match_expression
    from kairox_core.retrieval.index import DocumentInput, WorkspaceRagIndex, pack_vector
    from kairox_core.store.connection import transaction

    tmp = tempfile.TemporaryDirectory()
    db = args.db or Path(tmp.name) / "bench.db"
    backend = HashingEmbedding(args.dimension)
    index = WorkspaceRagIndex(db, "bench", backend)
    texts, vocab = documents(args.chunks)
    build_seconds = timed(
        lambda: index.add_documents(
            (DocumentInput(f"doc-{i}", t) for i, t in enumerate(texts)), batch_size=512
        )
    )
    index.optimize()
    chunks = index.chunk_count()
    conn = index.conn
    vec_table = f"rag_vec_{args.dimension}"

    # standalone plain tables with the same data: the engines with nothing around them
    with transaction(conn):
        conn.execute("DROP TABLE IF EXISTS bench_plain_vec")
        conn.execute("DROP TABLE IF EXISTS bench_plain_fts")
        conn.execute(
            f"CREATE VIRTUAL TABLE bench_plain_vec USING vec0("
            f"embedding float[{args.dimension}] distance_metric=cosine)"
        )
        conn.execute(
            f"INSERT INTO bench_plain_vec(rowid, embedding) "
            f"SELECT rowid, embedding FROM {vec_table}"
        )
        conn.execute(
            "CREATE VIRTUAL TABLE bench_plain_fts USING fts5(text, "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        conn.execute("INSERT INTO bench_plain_fts(rowid, text) SELECT id, text FROM rag_chunks")

    rng = random.Random(11)
    mid = vocab[200:5000]
    queries = [" ".join(rng.sample(mid, rng.randint(2, 4))) for _ in range(args.queries)]
    vectors = [pack_vector(backend.embed_query(q)) for q in queries]
    exprs = [fts_match_expression(q) for q in queries]
    k = args.k

    def run_index(mode: str) -> Callable[[], None]:
        return lambda: [index.search(q, k, mode) for q in queries] and None

    def raw_vec(table: str, partition: bool) -> Callable[[], None]:
        extra = " AND workspace_id = 'bench'" if partition else ""
        sql = f"SELECT rowid, distance FROM {table} WHERE embedding MATCH ? AND k = ?{extra}"
        return lambda: [conn.execute(sql, (v, k)).fetchall() for v in vectors] and None

    def raw_fts(table: str) -> Callable[[], None]:
        sql = (
            f"SELECT rowid, bm25({table}) AS s FROM {table} WHERE {table} MATCH ? "
            f"ORDER BY s LIMIT ?"
        )
        return lambda: [conn.execute(sql, (e, k)).fetchall() for e in exprs] and None

    cases = {
        "index_vector": run_index("vector"),
        "raw_vec_same_table": raw_vec(vec_table, True),
        "raw_vec_plain_table": raw_vec("bench_plain_vec", False),
        "index_keyword": run_index("keyword"),
        "raw_fts_same_table": raw_fts("rag_fts"),
        "raw_fts_plain_table": raw_fts("bench_plain_fts"),
        "index_hybrid": run_index("hybrid"),
    }
    if args.only:
        family = {"vector": ("index_vector", "raw_vec"), "keyword": ("index_keyword", "raw_fts")}
        cases = {n: f for n, f in cases.items() if n.startswith(family[args.only])}
    for fn in cases.values():  # warm the page cache and the statement caches
        fn()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():  # interleaved: load on the machine hits all alike
            samples[name].append(timed(fn))
    ms = {name: 1000 * statistics.median(s) / len(queries) for name, s in samples.items()}
    pairs = {
        "vector_vs_raw_same_table": ("index_vector", "raw_vec_same_table"),
        "vector_vs_raw_plain_table": ("index_vector", "raw_vec_plain_table"),
        "keyword_vs_raw_same_table": ("index_keyword", "raw_fts_same_table"),
        "keyword_vs_raw_plain_table": ("index_keyword", "raw_fts_plain_table"),
    }
    ratios = {name: ms[a] / ms[b] for name, (a, b) in pairs.items() if a in ms and b in ms}
    result = {
        "chunks": chunks,
        "queries": len(queries),
        "k": k,
        "rounds": args.rounds,
        "ms_per_query": {n: round(v, 3) for n, v in ms.items()},
        "ratios": {n: round(v, 3) for n, v in ratios.items()},
        "goal": GOAL,
        "within_goal": all(v <= GOAL for v in ratios.values()),
        "index_build_seconds": round(build_seconds, 1),
        "embedded_chunks": index.embedded_chunks,  # 0 when --db reused an existing index
        "hashing_chunks_per_second": (
            round(index.embedded_chunks / build_seconds, 1) if index.embedded_chunks else None
        ),
    }
    index.close()
    tmp.cleanup()
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
