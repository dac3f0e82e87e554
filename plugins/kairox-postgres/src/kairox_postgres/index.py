"""The workspace retrieval index on PostgreSQL: FTS5's bm25 in SQL, pgvector HNSW, one fusion.

Documents are chunked, hashed and embedded exactly as ``WorkspaceRagIndex`` does (the
shared helpers of ``kairox_core.store.indexing``). Keywords rank by FTS5's own
bm25: each chunk's terms are cut by FTS5's tokenizer (``fts5_terms.Fts5Terms``, the
``porter unicode61 remove_diacritics 2`` of ``rag_fts``) and stored as postings (term,
chunk, frequency, length) beside per-term document counts and per-space totals that
triggers keep in step, so a query reads only its own terms' postings and scores as
SQLite would (``ts_rank`` has no idf: SciFact nDCG@10 0.545 against bm25's 0.702).
Vectors rank by pgvector's cosine distance through an HNSW index per dimension, with
iterative index scans so a filtered k-NN still finds its ``k`` rows, and an exact scan
when the index cannot. Hybrid search fuses the two rankings (weighted reciprocal
rank), best chunk per document. Every query is confined to its space by a column.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kairox_core.errors import KairoxUserError
from kairox_core.store.indexing import (
    BM25_B,
    BM25_K1,
    CHEAP_ROWS,
    IDF_FLOOR,
    MAX_TERMS,
    MODES,
    SOURCE,
    Chunk,
    Chunker,
    DocumentInfo,
    DocumentInput,
    EmbeddingBackend,
    Fts5Terms,
    IndexBackendMismatch,
    Ranked,
    RetrievalHit,
    TermCounts,
    WorkspaceIndexRetriever,
    batches,
    build_hits,
    chunk_vectors,
    collapse,
    doc_hash,
    embed_texts,
    file_document,
    filter_values,
    fuse_rankings,
    last_per_doc_id,
    load_embedding_backend,
    metadata_json,
    query_terms,
    query_weights,
    select_terms,
    statuses,
    weightless_floor,
    with_context,
)
from kairox_core.store.protocol import IndexCapabilities
from kairox_postgres.db import PgDatabase

# hnsw.ef_search: twice the rows a query asks for (on SciFact with the hashing backend,
# 1x lost hybrid nDCG@10 against the exact scan where 2x kept it: docs/results.md),
# pgvector's default 40 at least and its ceiling 1000 at most
HNSW_EF_FACTOR = 2
HNSW_EF_MIN = 40
HNSW_EF_MAX = 1000
# The query's terms, chosen in SQL as ``fts5_terms.select_terms`` (TermSelector) does:
# per word its rarest stem's df; the weightless (in half the space or more) in more
# than WEIGHTLESS_ROWS chunks dropped, a word in at most CHEAP_ROWS chunks kept, of the
# others the rarest kept up to MAX_TERMS; a query of weightless words keeps its rarest.
_FLOOR = weightless_floor()
_SELECT_TERMS = (
    "w AS (SELECT u.word, u.term, t.id, coalesce(t.df, 0) AS df "
    "FROM unnest(%(words)s::int[], %(stems)s::text[]) AS u(word, term) "
    "LEFT JOIN rag_terms t ON t.workspace_id = %(space)s AND t.term = u.term), "
    "per AS (SELECT word, min(df) AS freq, count(*) AS parts FROM w GROUP BY word), "
    f"ok AS (SELECT word, freq, freq <= {CHEAP_ROWS} AS cheap, row_number() OVER "
    f"(PARTITION BY freq <= {CHEAP_ROWS} ORDER BY freq, word) AS r FROM per, s "
    f"WHERE freq <= {_FLOOR} OR parts > 1 OR 2 * freq < s.n "
    "OR (SELECT count(*) FROM per) <= 1 "
    # every word weightless: the rarest is kept (it still orders rows by its use)
    f"OR (NOT EXISTS (SELECT 1 FROM per, s WHERE freq <= {_FLOOR} OR parts > 1 "
    "OR 2 * freq < s.n) AND word = (SELECT word FROM per ORDER BY freq, word LIMIT 1))), "
    "q AS (SELECT w.id, w.df, count(*) AS n FROM w WHERE w.df > 0 AND w.word IN ("
    f"SELECT word FROM ok WHERE cheap OR r <= {MAX_TERMS} - (SELECT count(*) FROM ok WHERE cheap)"
    ") GROUP BY w.id, w.df)"
)
# terms given (the raw query's form): q holds (term id, df, query weight)
_GIVEN_TERMS = (
    "q AS (SELECT t.id, t.df, u.n FROM rag_terms t "
    "JOIN unnest(%(terms)s::text[], %(weights)s::int[]) AS u(term, n) ON t.term = u.term "
    "WHERE t.workspace_id = %(space)s AND t.df > 0)"
)
# FTS5's bm25 over the space's postings of q's terms; s holds the space's totals
_BM25 = (
    "WITH s AS (SELECT chunks::float8 AS n, tokens::float8 / greatest(chunks, 1) AS avgdl "
    "FROM rag_kw_spaces WHERE workspace_id = %(space)s), {terms} "
    "SELECT p.chunk_id AS id, p.document_id, sum(q.n * greatest("
    "CASE WHEN s.n - q.df + 0.5 > q.df + 0.5 THEN ln((s.n - q.df + 0.5) / (q.df + 0.5)) "
    f"ELSE 0 END, {IDF_FLOOR}) * p.tf * {BM25_K1 + 1} / (p.tf + {BM25_K1} * "
    f"({1 - BM25_B} + {BM25_B} * p.dl / s.avgdl))) AS score "
    "FROM q JOIN rag_postings p ON p.term_id = q.id CROSS JOIN s{join}{where} "
    "GROUP BY p.chunk_id, p.document_id ORDER BY score DESC, p.chunk_id LIMIT %(limit)s"
)
# what a hit shows, joined onto a ranking r(id, document_id, score) in the same query:
# one round trip per ranking (on a network, round trips are what a search costs)
_PAYLOAD = (
    "SELECT r.*, c.text, c.heading, d.doc_id, d.doc_type, d.path, d.title, d.metadata "
    "FROM r JOIN rag_chunks c ON c.id = r.id JOIN rag_documents d ON d.id = r.document_id "
)
_terms: Fts5Terms | None = None
_terms_lock = threading.Lock()


def fts5_terms() -> Fts5Terms:
    """The process's FTS5 tokenizer (thread-safe, made on first use)."""
    global _terms
    with _terms_lock:
        if _terms is None:
            _terms = Fts5Terms()
        return _terms


def _vector_text(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class PgWorkspaceIndex:
    """One space's index (a workspace, or a session's recall) on the shared database."""

    capabilities = IndexCapabilities(files=True)

    def __init__(
        self,
        db: PgDatabase,
        workspace_id: str,
        backend: EmbeddingBackend,
        *,
        chunk_tokens: int = 512,
        chunk_overlap: int = 64,
        rrf_k: int = 60,
        keyword_weight: float = 1.0,
        vector_weight: float = 1.0,
        candidates: int = 100,
    ) -> None:
        self.db = db
        self.workspace_id = workspace_id
        self.backend = backend
        self.chunker = Chunker(chunk_tokens, chunk_overlap)
        self.rrf_k = rrf_k
        self.keyword_weight = keyword_weight
        self.vector_weight = vector_weight
        self.candidates = candidates
        self.embed_calls = 0
        self.embedded_chunks = 0
        self._lock = threading.RLock()  # the server serialises; this keeps rebuilds whole
        self._hnsw_ready: set[int] = set()
        self._keywords_ready = False
        # per pooled connection: the hnsw.ef_search it was last given (session settings)
        self._tuned: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    @classmethod
    def from_config(
        cls, config: Any, db: PgDatabase, space: str, backend: EmbeddingBackend | None = None
    ) -> PgWorkspaceIndex:
        r = config.retrieval
        return cls(
            db,
            space,
            backend or load_embedding_backend(r),
            chunk_tokens=r.chunk_tokens,
            chunk_overlap=r.chunk_overlap,
            rrf_k=r.rrf_k,
            keyword_weight=r.keyword_weight,
            vector_weight=r.vector_weight,
            candidates=r.hybrid_candidates,
        )

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def as_retriever(self, name: str = SOURCE, mode: str = "hybrid") -> WorkspaceIndexRetriever:
        return WorkspaceIndexRetriever(self, name=name, mode=mode)

    def close(self) -> None:
        """Nothing of its own to release: the storage closes the pool."""

    # --- the backend that embedded the space ----------------------------------------------

    def recorded_backend(self) -> tuple[str, int] | None:
        rows = self.db.execute(
            "SELECT backend, dimension FROM rag_spaces WHERE workspace_id = %s",
            (self.workspace_id,),
        )
        return (str(rows[0]["backend"]), int(rows[0]["dimension"])) if rows else None

    def check_backend(self, recorded: tuple[str, int] | None = None) -> None:
        """Raise ``IndexBackendMismatch`` if the space was embedded with another backend."""
        recorded = recorded or self.recorded_backend()
        current = (self.backend.name, int(self.backend.dimension))
        if recorded is not None and recorded != current:
            raise IndexBackendMismatch(
                f"workspace '{self.workspace_id}' was indexed with embedding backend "
                f"'{recorded[0]}' (dimension {recorded[1]}), but '{current[0]}' (dimension "
                f"{current[1]}) is configured; re-embed it (rebuild), or set "
                "[retrieval] backend back"
            )

    def _record_backend(self, conn: Any) -> None:
        conn.execute(
            "INSERT INTO rag_spaces (workspace_id, backend, dimension, updated_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (workspace_id) DO UPDATE SET "
            "backend = excluded.backend, dimension = excluded.dimension, "
            "updated_at = excluded.updated_at",
            (self.workspace_id, self.backend.name, int(self.backend.dimension), time.time()),
        )

    def ensure_hnsw(self, dim: int | None = None) -> None:
        """The HNSW index for the dimension exists (made once per dimension; building it
        locks out writers, so it is looked up first and made only when missing)."""
        dim = int(dim if dim is not None else self.backend.dimension)
        if dim in self._hnsw_ready:
            return
        rows = self.db.execute("SELECT to_regclass(%s) IS NOT NULL AS present", (_hnsw(dim),))
        if not rows[0]["present"]:
            self.db.execute("SELECT kx_rag_hnsw(%s)", (dim,))
        self._hnsw_ready.add(dim)

    def _embed(self, items: Sequence[tuple[str, str, str]]) -> list[str]:
        """Vectors (as pgvector text) for (text, heading, context) chunks, one call."""
        if not items:
            return []
        self.embed_calls += 1
        self.embedded_chunks += len(items)
        vectors = self.backend.embed_documents(embed_texts(items))
        return [_vector_text(v) for v in chunk_vectors(items, vectors)]

    # --- writing --------------------------------------------------------------------------

    def add_text(self, doc_id: str, text: str, **fields: Any) -> str:
        """Index (or re-index) one string; "added", "updated" or "unchanged"."""
        return self.add_documents([DocumentInput(doc_id, text, **fields)])[0]

    def add_file(
        self,
        path: str | os.PathLike[str],
        *,
        doc_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Index one text file (by resolved path), as the SQLite index does (``kairox
        index``): "unchanged" (same mtime and size) costs a stat and one query."""
        p = Path(path).expanduser().resolve()
        st = p.stat()
        key = doc_id or str(p)
        rows = self.db.execute(
            "SELECT mtime, size FROM rag_documents WHERE workspace_id = %s AND doc_id = %s",
            (self.workspace_id, key),
        )
        if rows and rows[0]["mtime"] == st.st_mtime and rows[0]["size"] == st.st_size:
            return "unchanged"
        return self.add_documents([file_document(p, st, key, metadata)])[0]

    def add_documents(
        self,
        docs: Iterable[DocumentInput],
        *,
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> list[str]:
        """Index many documents, one transaction per batch; statuses in input order."""
        out: list[str] = []
        for batch in batches(docs, batch_size):
            out += self._add_batch(batch)
            if progress:
                progress(len(batch))
        return out

    def _add_batch(self, batch: list[DocumentInput]) -> list[str]:
        docs = last_per_doc_id(batch)  # a doc id given twice: the last one is stored
        with self._lock:
            self.check_backend()
            self.ensure_hnsw()
            self.ensure_keywords()
            existing = self._document_rows(self.db.execute, [d.doc_id for d in docs])
            plan: list[tuple[DocumentInput, str, list[Chunk] | None]] = []
            for doc in docs:
                old = existing.get(doc.doc_id)
                dhash = doc_hash(doc.title, doc.text, doc.context)
                if old is not None and old[1] == dhash:
                    plan.append((doc, dhash, None))  # metadata may still have changed
                    continue
                chunks = [with_context(c, doc.context) for c in self.chunker.chunk(doc.text)]
                plan.append((doc, dhash, chunks if doc.text.strip() else []))
            out = statuses(batch, {k: v[1] for k, v in existing.items()})
            wanted = sorted({c.content_hash for _, _, cs in plan if cs for c in cs})
            known = self._vectors_by_hash(wanted)
            missing: dict[str, tuple[str, str, str]] = {}
            for doc, _, planned in plan:
                for c in planned or []:
                    if c.content_hash not in known:
                        missing.setdefault(c.content_hash, (c.text, c.heading, doc.context))
            known.update(zip(missing, self._embed(list(missing.values())), strict=True))
            with self.db.atomic() as conn:
                # Writers of one space queue here (another process indexing the same turns):
                # the rows are read again under the lock, so none adds a document twice.
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"rag\x1f{self.workspace_id}",),
                )

                def read(sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
                    return list(conn.execute(sql, args).fetchall())

                now = self._document_rows(read, [d.doc_id for d in docs])
                self._record_backend(conn)
                new_chunks: list[tuple[int, DocumentInput, list[Chunk]]] = []
                for doc, dhash, planned in plan:
                    old = now.get(doc.doc_id)
                    if old is not None and old[1] == dhash and planned:
                        planned = None  # written meanwhile with this very text
                    elif old is None and planned is None:
                        continue  # deleted meanwhile: its vectors are gone with it
                    document_id = self._write_document(conn, doc, dhash, planned, old)
                    if planned:
                        new_chunks.append((document_id, doc, planned))
                self._insert_chunks(conn, new_chunks, known)
            return out

    def _document_rows(
        self, read: Callable[..., list[dict[str, Any]]], doc_ids: list[str]
    ) -> dict[str, tuple[int, str]]:
        rows = read(
            "SELECT id, doc_id, content_hash FROM rag_documents "
            "WHERE workspace_id = %s AND doc_id = ANY(%s)",
            (self.workspace_id, doc_ids),
        )
        return {r["doc_id"]: (int(r["id"]), str(r["content_hash"])) for r in rows}

    def _vectors_by_hash(self, hashes: list[str]) -> dict[str, str]:
        if not hashes:
            return {}
        rows = self.db.execute(
            "SELECT DISTINCT ON (content_hash) content_hash, embedding::text AS v "
            "FROM rag_chunks WHERE workspace_id = %s AND content_hash = ANY(%s) "
            "AND embedding IS NOT NULL",
            (self.workspace_id, hashes),
        )
        return {str(r["content_hash"]): str(r["v"]) for r in rows}

    def _write_document(
        self,
        conn: Any,
        doc: DocumentInput,
        dhash: str,
        chunks: list[Chunk] | None,
        old: tuple[int, str] | None,
    ) -> int:
        """The document row written (its old chunks gone if ``chunks`` replaces them)."""
        values = (
            doc.origin,
            doc.doc_type,
            doc.path,
            doc.title,
            metadata_json(doc.metadata),
            dhash,
            doc.mtime,
            doc.size,
            time.time(),
        )
        if old is not None:
            conn.execute(
                "UPDATE rag_documents SET origin = %s, doc_type = %s, path = %s, title = %s, "
                "metadata = %s::jsonb, content_hash = %s, mtime = %s, size = %s, "
                "updated_at = %s WHERE id = %s",
                (*values, old[0]),
            )
            if chunks is not None:  # new text: the old chunks (and postings) go
                conn.execute("DELETE FROM rag_chunks WHERE document_id = %s", (old[0],))
            return old[0]
        row = conn.execute(
            "INSERT INTO rag_documents (workspace_id, doc_id, origin, doc_type, path, "
            "title, metadata, content_hash, mtime, size, updated_at) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s) RETURNING id",
            (self.workspace_id, doc.doc_id, *values),
        ).fetchone()
        return int(row["id"])

    def _insert_chunks(
        self,
        conn: Any,
        items: list[tuple[int, DocumentInput, list[Chunk]]],
        vectors: Mapping[str, str],
    ) -> None:
        """All the batch's chunks in one statement, then their postings."""
        rows = [(did, doc, i, c) for did, doc, cs in items for i, c in enumerate(cs)]
        if not rows:
            return
        counts = fts5_terms().chunks([(c.text, c.heading) for _, _, _, c in rows])
        ids = conn.execute(
            "INSERT INTO rag_chunks (document_id, workspace_id, ord, text, heading, tokens, "
            "content_hash, context, embedding, kw_len) SELECT d, %s, o, t, h, n, ch, cx, "
            "e::vector, kl FROM unnest(%s::bigint[], %s::int[], %s::text[], %s::text[], "
            "%s::int[], %s::text[], %s::text[], %s::text[], %s::int[]) WITH ORDINALITY "
            "AS u(d, o, t, h, n, ch, cx, e, kl, at) ORDER BY at RETURNING id",
            (
                self.workspace_id,
                [r[0] for r in rows],
                [r[2] for r in rows],
                [r[3].text for r in rows],
                [r[3].heading for r in rows],
                [r[3].tokens for r in rows],
                [r[3].content_hash for r in rows],
                [r[1].context for r in rows],
                [vectors[r[3].content_hash] for r in rows],
                [tc.length for tc in counts],
            ),
        ).fetchall()
        chunk_ids = [int(r["id"]) for r in ids]  # RETURNING keeps the insert's order
        self._insert_postings(conn, list(zip(chunk_ids, [r[0] for r in rows], counts, strict=True)))

    def _insert_postings(self, conn: Any, chunks: list[tuple[int, int, TermCounts]]) -> None:
        insert_postings(conn, self.workspace_id, chunks)

    def ensure_keywords(self, *, batch_size: int = 2000) -> int:
        """Cut the terms of the space's chunks that have none yet (rows written before
        the postings existed, or copied in); returns how many. Once per index."""
        if self._keywords_ready:
            return 0
        pending = self.db.execute(
            "SELECT EXISTS (SELECT 1 FROM rag_chunks WHERE workspace_id = %s "
            "AND kw_len IS NULL) AS pending",
            (self.workspace_id,),
        )
        if not pending[0]["pending"]:
            self._keywords_ready = True
            return 0
        done = 0
        with self._lock:
            while True:
                with self.db.atomic() as conn:
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                        (f"rag\x1f{self.workspace_id}",),
                    )
                    rows = conn.execute(
                        "SELECT id, document_id, text, heading FROM rag_chunks "
                        "WHERE workspace_id = %s AND kw_len IS NULL ORDER BY id LIMIT %s",
                        (self.workspace_id, batch_size),
                    ).fetchall()
                    if not rows:
                        break
                    counts = fts5_terms().chunks([(r["text"], r["heading"]) for r in rows])
                    conn.execute(
                        "UPDATE rag_chunks c SET kw_len = u.n FROM unnest(%s::bigint[], "
                        "%s::int[]) AS u(id, n) WHERE c.id = u.id",
                        ([r["id"] for r in rows], [tc.length for tc in counts]),
                    )
                    self._insert_postings(
                        conn,
                        [
                            (int(r["id"]), int(r["document_id"]), tc)
                            for r, tc in zip(rows, counts, strict=True)
                        ],
                    )
                    done += len(rows)
            self._keywords_ready = True
        return done

    def delete(self, doc_id: str) -> bool:
        return self.delete_many([doc_id]) == 1

    def delete_many(self, doc_ids: Iterable[str]) -> int:
        """Remove documents (their chunks and postings cascade); how many were indexed."""
        ids = list(doc_ids)
        with self.db.atomic() as conn:
            # the space's writers' lock: the statistics' rows are then updated by one
            # transaction at a time (in no set order: two at once could deadlock)
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"rag\x1f{self.workspace_id}",),
            )
            conn.execute(  # chunks first, in one statement: the triggers run once
                "DELETE FROM rag_chunks WHERE document_id IN (SELECT id FROM rag_documents "
                "WHERE workspace_id = %s AND doc_id = ANY(%s))",
                (self.workspace_id, ids),
            )
            rows = conn.execute(
                "DELETE FROM rag_documents WHERE workspace_id = %s AND doc_id = ANY(%s) "
                "RETURNING 1",
                (self.workspace_id, ids),
            ).fetchall()
        return len(rows)

    def documents(self, *, origin: str | None = None) -> list[DocumentInfo]:
        sql = (
            "SELECT d.doc_id, d.doc_type, d.path, d.origin, d.content_hash, "
            "(SELECT count(*) FROM rag_chunks c WHERE c.document_id = d.id) AS n "
            "FROM rag_documents d WHERE d.workspace_id = %s"
        )
        args: list[Any] = [self.workspace_id]
        if origin is not None:
            sql += " AND d.origin = %s"
            args.append(origin)
        rows = self.db.execute(sql + " ORDER BY d.doc_id", args)
        return [
            DocumentInfo(
                r["doc_id"], r["doc_type"], r["path"], r["origin"], r["content_hash"], int(r["n"])
            )
            for r in rows
        ]

    def optimize(self) -> None:
        """VACUUM ANALYZE the index's tables after a large load: fresh planner statistics
        and a visibility map, so postings are read from their index alone."""
        for table in ("rag_postings", "rag_terms", "rag_chunks", "rag_documents"):
            self.db.execute(f"VACUUM (ANALYZE) {table}")

    def chunk_count(self) -> int:
        rows = self.db.execute(
            "SELECT count(*) AS n FROM rag_chunks WHERE workspace_id = %s", (self.workspace_id,)
        )
        return int(rows[0]["n"])

    def rebuild(
        self, *, batch_size: int = 256, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Re-embed every chunk of the space with the current backend; returns chunks."""
        with self._lock:
            rows = self.db.execute(
                "SELECT id, text, heading, context FROM rag_chunks WHERE workspace_id = %s "
                "ORDER BY id",
                (self.workspace_id,),
            )
            vectors: list[str] = []
            for start in range(0, len(rows), batch_size):
                part = rows[start : start + batch_size]
                vectors += self._embed([(r["text"], r["heading"], r["context"]) for r in part])
                if progress:
                    progress(min(start + batch_size, len(rows)), len(rows))
            self.ensure_hnsw()
            with self.db.atomic() as conn:
                self._record_backend(conn)
                conn.execute(
                    "UPDATE rag_chunks c SET embedding = u.e::vector FROM unnest(%s::bigint[], "
                    "%s::text[]) AS u(id, e) WHERE c.id = u.id",
                    ([r["id"] for r in rows], vectors),
                )
            return len(rows)

    # --- searching ------------------------------------------------------------------------

    def search(
        self, query: str, k: int = 8, mode: str = "hybrid", filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        """The best ``k`` documents (best chunk of each) for ``query``."""
        if mode not in MODES:
            raise KairoxUserError(f"unknown search mode '{mode}'; use one of: {', '.join(MODES)}")
        if k <= 0:
            return []
        where, args = _filter_sql(filters or {})
        rows: dict[int, dict[str, Any]] = {}  # hit payloads the rankings brought along
        if mode == "keyword":
            return self._hits(self._keyword(query, k, where, args, rows), rows)
        if mode == "vector":
            return self._hits(self._vector(query, k, where, args, rows), rows)
        n = max(k, self.candidates)
        vector = self._vector(query, n, where, args, rows)
        keyword = self._keyword(query, n, where, args, rows)
        fused = fuse_rankings(
            [(self.keyword_weight, keyword), (self.vector_weight, vector)],
            rrf_k=self.rrf_k,
            limit=k,
        )
        return self._hits(fused, rows)

    def rankings(
        self, query: str, n: int, filters: Mapping[str, Any] | None = None
    ) -> tuple[Ranked, Ranked]:
        """The keyword and vector rankings hybrid search fuses."""
        where, args = _filter_sql(filters or {})
        vector = self._vector(query, n, where, args, {})
        return self._keyword(query, n, where, args, {}), vector

    def keyword_terms(self, query: str) -> dict[str, int]:
        """The query's terms (FTS5's stems) and their weights, chosen as the SQLite index
        chooses them (``select_terms``); the search does the same inside its query."""
        words = query_terms(query)
        if not words:
            return {}
        stems = fts5_terms().words(words)
        if len(words) > 1:
            flat = sorted({s for parts in stems for s in parts})
            found = self.db.execute(
                "SELECT (SELECT chunks FROM rag_kw_spaces WHERE workspace_id = %s) AS n, "
                "(SELECT json_object_agg(term, df) FROM rag_terms WHERE workspace_id = %s "
                "AND term = ANY(%s)) AS df",
                (self.workspace_id, self.workspace_id, flat),
            )
            total = int(found[0]["n"] or 0)
            df = {str(t): int(n) for t, n in (found[0]["df"] or {}).items()}
            keep = select_terms(words, stems, df, total)
            stems = [stems[i] for i in keep]
        return query_weights(stems)

    def _keyword(
        self, query: str, k: int, where: str, args: list[Any], payload: dict[int, dict[str, Any]]
    ) -> Ranked:
        self.ensure_keywords()
        words = query_terms(query)
        stems = fts5_terms().words(words)
        pairs = [(i, s) for i, parts in enumerate(stems) for s in parts]
        if not pairs:
            return []
        join = " JOIN rag_documents d ON d.id = p.document_id" if where else ""
        ranking = _BM25.format(
            terms=_SELECT_TERMS, join=join, where=" WHERE TRUE" + _named(where) if where else ""
        )
        sql = f"WITH r AS MATERIALIZED ({ranking}) {_PAYLOAD} ORDER BY r.score DESC, r.id"
        params: dict[str, Any] = {
            "words": [i for i, _ in pairs],
            "stems": [s for _, s in pairs],
            "space": self.workspace_id,
            **{f"f{i}": a for i, a in enumerate(args)},
        }

        def fetch(limit: int) -> Ranked:
            rows = _named_query(self.db, sql, {**params, "limit": limit})
            payload.update((int(r["id"]), r) for r in rows)
            return [(int(r["id"]), int(r["document_id"]), float(r["score"])) for r in rows]

        return collapse(fetch, k)

    def _vector(
        self, query: str, k: int, where: str, args: list[Any], payload: dict[int, dict[str, Any]]
    ) -> Ranked:
        qvec = self.backend.embed_query(query)
        dim = len(qvec)
        vec = _vector_text(qvec)
        # the space must have been embedded by this backend: checked in the query itself,
        # and only when it finds nothing is the reason looked up (none yet, or a mismatch)
        scope = (
            f"c.workspace_id = %s AND vector_dims(c.embedding) = {dim}{where} AND EXISTS "
            "(SELECT 1 FROM rag_spaces s WHERE s.workspace_id = %s AND s.backend = %s "
            f"AND s.dimension = {dim})"
        )
        # the HNSW index (an iterative scan: filtered rows do not use up the candidates)
        # and, when it comes back short, an exact scan, which the index cannot serve;
        # each brings the rows its hits show
        shown = "c.text, c.heading, d.doc_id, d.doc_type, d.path, d.title, d.metadata"
        indexed = (
            f"SELECT c.id, c.document_id, c.embedding::vector({dim}) <=> %s::vector({dim}) "
            f"AS dist, {shown} FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id "
            f"WHERE {scope} ORDER BY dist LIMIT %s"
        )
        exact = (
            f"SELECT c.id, c.document_id, c.embedding <=> %s::vector AS dist, {shown} "
            f"FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id WHERE {scope} "
            "ORDER BY dist, c.id LIMIT %s"
        )
        params = (vec, self.workspace_id, *args, self.workspace_id, self.backend.name)
        checked = False

        def fetch(limit: int) -> Ranked:
            nonlocal checked
            with self.db.connection() as conn:
                self._tune(conn, limit)
                rows = conn.execute(indexed, (*params, limit)).fetchall()
                if len(rows) < limit:
                    rows = conn.execute(exact, (*params, limit)).fetchall()
            if not rows and not checked:
                self.check_backend()  # nothing found: raises if another backend embedded it
                checked = True
            payload.update((int(r["id"]), r) for r in rows)
            return [
                (int(r["id"]), int(r["document_id"]), 1.0 - float(r["dist"]))
                for r in rows
                if r["dist"] == r["dist"]  # NaN: a chunk with an all-zero vector
            ]

        if not any(qvec):  # no feature at all: cosine is undefined
            self.check_backend()
            return []
        return collapse(fetch, k)

    def _tune(self, conn: Any, limit: int) -> None:
        """Session settings for HNSW scans, set once per pooled connection (and again
        when a query needs another ``ef_search``): iterative scans in strict order (rows
        come back by distance: no re-sort, so the hit rows join in the same query),
        candidates for twice the rows asked for."""
        ef = max(HNSW_EF_MIN, min(HNSW_EF_MAX, HNSW_EF_FACTOR * limit))
        if self._tuned.get(conn) == ef:
            return
        conn.execute(
            "SELECT set_config('hnsw.iterative_scan', 'strict_order', false), "
            "set_config('hnsw.ef_search', %s, false)",
            (str(ef),),
        )
        self._tuned[conn] = ef

    def _hits(
        self, ranked: Sequence[tuple[int, int, float]], rows: dict[int, dict[str, Any]]
    ) -> list[RetrievalHit]:
        missing = [cid for cid, _, _ in ranked if cid not in rows]
        if missing:  # (the rankings bring their rows along: this is for safety only)
            for r in self.db.execute(
                "SELECT c.id, c.text, c.heading, d.doc_id, d.doc_type, d.path, d.title, "
                "d.metadata FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id "
                "WHERE c.id = ANY(%s)",
                (missing,),
            ):
                rows[int(r["id"])] = r
        return build_hits(ranked, rows, self.workspace_id)


def insert_postings(conn: Any, space: str, chunks: list[tuple[int, int, TermCounts]]) -> None:
    """Postings of a space's (chunk id, document id, counts), in the transaction of
    ``conn``; the terms' rows made as needed (the triggers count them)."""
    terms = sorted({t for _, _, tc in chunks for t in tc.frequencies})
    if not terms:
        return
    conn.execute(
        "INSERT INTO rag_terms (workspace_id, term) SELECT %s, unnest(%s::text[]) "
        "ON CONFLICT (workspace_id, term) DO NOTHING",
        (space, terms),
    )
    term_ids = {
        str(r["term"]): int(r["id"])
        for r in conn.execute(
            "SELECT id, term FROM rag_terms WHERE workspace_id = %s AND term = ANY(%s)",
            (space, terms),
        ).fetchall()
    }
    with (
        conn.cursor() as cur,
        cur.copy("COPY rag_postings (term_id, chunk_id, document_id, tf, dl) FROM STDIN") as copy,
    ):
        for cid, did, tc in chunks:
            for term, tf in tc.frequencies.items():
                copy.write_row((term_ids[term], cid, did, tf, tc.length))


def _hnsw(dim: int) -> str:
    return f"rag_chunks_hnsw_{int(dim)}"


def _named(where: str) -> str:
    """``%s`` placeholders as ``%(f0)s``, ``%(f1)s``... (the BM25 query names its own)."""
    count = iter(range(where.count("%s")))
    return re.sub(r"%s", lambda _: f"%(f{next(count)})s", where)


def raw_bm25_query(index: PgWorkspaceIndex, query: str, n: int) -> list[dict[str, Any]]:
    """The bare BM25 query the index wraps (terms cut, no collapse, no hits): baselines."""
    weights = index.keyword_terms(query)
    if not weights:
        return []
    sql = _BM25.format(terms=_GIVEN_TERMS, join="", where="")
    args = {
        "terms": list(weights),
        "weights": list(weights.values()),
        "space": index.workspace_id,
        "limit": n,
    }
    return _named_query(index.db, sql, args)


def _named_query(db: PgDatabase, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    with db.connection() as conn:
        return list(conn.execute(sql, params).fetchall())


def raw_knn_query(index: PgWorkspaceIndex, query: str, n: int) -> list[dict[str, Any]]:
    """The bare pgvector HNSW query the index wraps (default ef_search): baselines."""
    qvec = index.backend.embed_query(query)
    dim = len(qvec)
    return index.db.execute(
        f"SELECT id FROM rag_chunks WHERE workspace_id = %s AND vector_dims(embedding) = {dim} "
        f"ORDER BY embedding::vector({dim}) <=> %s::vector({dim}) LIMIT %s",
        (index.workspace_id, _vector_text(qvec), n),
    )


def _glob_regex(pattern: str) -> str:
    """A glob (``*``, ``?``, ``[...]``) as an anchored PostgreSQL regular expression."""
    out, i = ["^"], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out) + "$"


def _filter_sql(filters: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """SQL over ``d`` (documents) for ``filters``, as ``WorkspaceRagIndex`` reads them:
    ``path`` globs, ``doc_type``/``doc_id`` exact, other keys the metadata; lists allowed."""
    where: list[str] = []
    args: list[Any] = []
    for key, value in filters.items():
        values = filter_values(key, value)
        if key == "path":
            where.append("(" + " OR ".join("d.path ~ %s" for _ in values) + ")")
            args += [_glob_regex(str(v)) for v in values]
        elif key in ("doc_type", "doc_id"):
            where.append(f"d.{key} = ANY(%s)")
            args.append([str(v) for v in values])
        else:
            where.append("d.metadata ->> %s = ANY(%s)")
            args += [key, [json.dumps(v) if isinstance(v, bool) else str(v) for v in values]]
    return "".join(" AND " + w for w in where), args


__all__ = [
    "PgWorkspaceIndex",
    "fts5_terms",
    "insert_postings",
    "raw_bm25_query",
    "raw_knn_query",
]
