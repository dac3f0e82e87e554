"""The workspace retrieval index on PostgreSQL: full-text search, pgvector, the same fusion.

Documents are chunked and embedded exactly as ``WorkspaceRagIndex`` does (the core's
``Chunker``, the configured embedding backend, a turn's context mixed into its vector);
keywords rank with ``ts_rank`` over a generated ``tsvector`` (``kx_english``: English
snowball stemming and no stop words, like the FTS5 ``porter unicode61`` tokenizer the
SQLite index uses), vectors by
pgvector's cosine distance, and hybrid search fuses the two rankings with the core's
``fuse_rankings`` (weighted reciprocal rank), best chunk per document. Every query is
confined to its space by a column. Vectors sit in an untyped ``vector`` column, so a
space's dimension is whatever its backend gives, and a k-NN is an exact scan of the
space's chunks (no HNSW index yet: see the README).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kairox_core.errors import KairoxUserError
from kairox_core.retrieval.base import EmbeddingBackend, RetrievalHit, RetrieverError
from kairox_core.retrieval.chunking import Chunker
from kairox_core.retrieval.fts import query_terms
from kairox_core.retrieval.index import (
    MODES,
    SOURCE,
    DocumentInput,
    IndexBackendMismatch,
    WorkspaceIndexRetriever,
    _doc_hash,
    _mean_vector,
    _with_context,
    fuse_rankings,
)
from kairox_postgres.db import PgDatabase

Ranked = list[tuple[int, int, float]]  # (chunk id, document id, score), best first
_TSQUERY = (
    "to_tsquery('kx_english', array_to_string(ARRAY(SELECT quote_literal(t) "
    "FROM unnest(%s::text[]) AS t), ' | '))"
)


def _vector_text(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class PgWorkspaceIndex:
    """One space's index (a workspace, or a session's recall) on the shared database."""

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
        self._lock = threading.RLock()  # the server serialises; this keeps rebuilds whole

    @classmethod
    def from_config(
        cls, config: Any, db: PgDatabase, space: str, backend: EmbeddingBackend | None = None
    ) -> PgWorkspaceIndex:
        from kairox_core.retrieval.embeddings import load_embedding_backend

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

    def _embed(self, items: Sequence[tuple[str, str, str]]) -> list[str]:
        """Vectors (as pgvector text) for (text, heading, context) chunks, one call."""
        if not items:
            return []
        texts: list[str] = []
        for text, heading, context in items:
            texts.append(f"{heading}\n{text}" if heading else text)
            if context:
                texts.append(f"{context}\n{text}")
        self.embed_calls += 1
        vectors = iter(self.backend.embed_documents(texts))
        out = []
        for _, _, context in items:
            own = list(next(vectors))
            out.append(_vector_text(_mean_vector([own, list(next(vectors))]) if context else own))
        return out

    # --- writing --------------------------------------------------------------------------

    def add_text(self, doc_id: str, text: str, **fields: Any) -> str:
        """Index (or re-index) one string; "added", "updated" or "unchanged"."""
        return self.add_documents([DocumentInput(doc_id, text, **fields)])[0]

    def add_documents(
        self,
        docs: Iterable[DocumentInput],
        *,
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> list[str]:
        """Index many documents, one transaction per batch; statuses in input order."""
        statuses: list[str] = []
        batch: list[DocumentInput] = []
        for doc in docs:
            batch.append(doc)
            if len(batch) >= batch_size:
                statuses += self._add_batch(batch)
                if progress:
                    progress(len(batch))
                batch = []
        if batch:
            statuses += self._add_batch(batch)
            if progress:
                progress(len(batch))
        return statuses

    def _add_batch(self, docs: list[DocumentInput]) -> list[str]:
        with self._lock:
            self.check_backend()
            rows = self.db.execute(
                "SELECT id, doc_id, content_hash FROM rag_documents "
                "WHERE workspace_id = %s AND doc_id = ANY(%s)",
                (self.workspace_id, [d.doc_id for d in docs]),
            )
            existing = {r["doc_id"]: (int(r["id"]), str(r["content_hash"])) for r in rows}
            plan: list[tuple[DocumentInput, str, list[Any] | None]] = []
            statuses: list[str] = []
            for doc in docs:
                old = existing.get(doc.doc_id)
                dhash = _doc_hash(doc)
                if old is not None and old[1] == dhash:
                    statuses.append("unchanged")
                    plan.append((doc, dhash, None))  # metadata may still have changed
                    continue
                statuses.append("updated" if old is not None else "added")
                chunks = [_with_context(c, doc.context) for c in self.chunker.chunk(doc.text)]
                plan.append((doc, dhash, chunks if doc.text.strip() else []))
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
                rows = conn.execute(
                    "SELECT id, doc_id, content_hash FROM rag_documents "
                    "WHERE workspace_id = %s AND doc_id = ANY(%s)",
                    (self.workspace_id, [d.doc_id for d in docs]),
                ).fetchall()
                now = {r["doc_id"]: (int(r["id"]), str(r["content_hash"])) for r in rows}
                self._record_backend(conn)
                for doc, dhash, planned in plan:
                    old = now.get(doc.doc_id)
                    if old is not None and old[1] == dhash and planned:
                        planned = None  # written meanwhile with this very text
                    elif old is None and planned is None:
                        continue  # deleted meanwhile: its vectors are gone with it
                    self._write(conn, doc, dhash, planned, old[0] if old else None, known)
            return statuses

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

    def _write(
        self,
        conn: Any,
        doc: DocumentInput,
        dhash: str,
        chunks: list[Any] | None,
        document_id: int | None,
        vectors: Mapping[str, str],
    ) -> None:
        meta = json.dumps(dict(doc.metadata), sort_keys=True, default=str)
        values = (
            doc.origin,
            doc.doc_type,
            doc.path,
            doc.title,
            meta,
            dhash,
            doc.mtime,
            doc.size,
            time.time(),
        )
        if document_id is not None:
            conn.execute(
                "UPDATE rag_documents SET origin = %s, doc_type = %s, path = %s, title = %s, "
                "metadata = %s::jsonb, content_hash = %s, mtime = %s, size = %s, "
                "updated_at = %s WHERE id = %s",
                (*values, document_id),
            )
            if chunks is None:  # same text: metadata refreshed, vectors kept
                return
            conn.execute("DELETE FROM rag_chunks WHERE document_id = %s", (document_id,))
        else:
            row = conn.execute(
                "INSERT INTO rag_documents (workspace_id, doc_id, origin, doc_type, path, "
                "title, metadata, content_hash, mtime, size, updated_at) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s) RETURNING id",
                (self.workspace_id, doc.doc_id, *values),
            ).fetchone()
            document_id = int(row["id"])
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO rag_chunks (document_id, workspace_id, ord, text, heading, tokens, "
                "content_hash, context, embedding) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::vector)",
                [
                    (
                        document_id,
                        self.workspace_id,
                        i,
                        c.text,
                        c.heading,
                        c.tokens,
                        c.content_hash,
                        doc.context,
                        vectors[c.content_hash],
                    )
                    for i, c in enumerate(chunks or [])
                ],
            )

    def delete(self, doc_id: str) -> bool:
        return self.delete_many([doc_id]) == 1

    def delete_many(self, doc_ids: Iterable[str]) -> int:
        """Remove documents (their chunks cascade); how many were indexed."""
        rows = self.db.execute(
            "DELETE FROM rag_documents WHERE workspace_id = %s AND doc_id = ANY(%s) RETURNING 1",
            (self.workspace_id, list(doc_ids)),
        )
        return len(rows)

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
            with self.db.atomic() as conn:
                self._record_backend(conn)
                with conn.cursor() as cur:
                    cur.executemany(
                        "UPDATE rag_chunks SET embedding = %s::vector WHERE id = %s",
                        [(v, r["id"]) for r, v in zip(rows, vectors, strict=True)],
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
        if mode == "keyword":
            return self._hits(self._keyword(query, k, where, args))
        recorded = self.recorded_backend()
        if recorded is None:  # nothing was ever written to this space
            return []
        self.check_backend(recorded)
        if mode == "vector":
            return self._hits(self._vector(query, k, where, args))
        keyword, vector = self.rankings(query, max(k, self.candidates), filters)
        fused = fuse_rankings(
            [(self.keyword_weight, keyword), (self.vector_weight, vector)],
            rrf_k=self.rrf_k,
            limit=k,
        )
        return self._hits(fused)

    def rankings(
        self, query: str, n: int, filters: Mapping[str, Any] | None = None
    ) -> tuple[Ranked, Ranked]:
        """The keyword and vector rankings hybrid search fuses."""
        where, args = _filter_sql(filters or {})
        return self._keyword(query, n, where, args), self._vector(query, n, where, args)

    @staticmethod
    def _collapse(fetch: Callable[[int], Ranked], k: int) -> Ranked:
        """Best chunk per document from the top chunks, over-fetching until ``k``
        documents are found or the chunks run out (the raw query, then a dedupe)."""
        limit = k * 2 + 4
        while True:
            rows = fetch(limit)
            seen: dict[int, tuple[int, int, float]] = {}
            for cid, doc, score in rows:
                seen.setdefault(doc, (cid, doc, score))
            if len(seen) >= k or len(rows) < limit:
                return list(seen.values())[:k]
            limit *= 4

    def _keyword(self, query: str, k: int, where: str, args: list[Any]) -> Ranked:
        terms = query_terms(query)
        if not terms:
            return []
        join = " JOIN rag_documents d ON d.id = c.document_id" if where else ""
        sql = (
            f"SELECT c.id, c.document_id, ts_rank(c.tsv, q) AS s FROM rag_chunks c{join}, "
            f"{_TSQUERY} AS q WHERE c.workspace_id = %s AND c.tsv @@ q{where} "
            "ORDER BY s DESC, c.id LIMIT %s"
        )

        def fetch(limit: int) -> Ranked:
            rows = self.db.execute(sql, (list(terms), self.workspace_id, *args, limit))
            return [(int(r["id"]), int(r["document_id"]), float(r["s"])) for r in rows]

        return self._collapse(fetch, k)

    def _vector(self, query: str, k: int, where: str, args: list[Any]) -> Ranked:
        qvec = self.backend.embed_query(query)
        if not any(qvec):  # no feature at all: cosine is undefined
            return []
        vec = _vector_text(qvec)
        join = " JOIN rag_documents d ON d.id = c.document_id" if where else ""
        sql = (
            f"SELECT c.id, c.document_id, c.embedding <=> %s::vector AS dist FROM rag_chunks c"
            f"{join} WHERE c.workspace_id = %s AND c.embedding IS NOT NULL{where} "
            "ORDER BY dist, c.id LIMIT %s"
        )

        def fetch(limit: int) -> Ranked:
            rows = self.db.execute(sql, (vec, self.workspace_id, *args, limit))
            return [
                (int(r["id"]), int(r["document_id"]), 1.0 - float(r["dist"]))
                for r in rows
                if r["dist"] == r["dist"]  # NaN: a chunk with an all-zero vector
            ]

        return self._collapse(fetch, k)

    def _hits(self, ranked: Sequence[tuple[int, int, float]]) -> list[RetrievalHit]:
        if not ranked:
            return []
        rows = {
            int(r["id"]): r
            for r in self.db.execute(
                "SELECT c.id, c.text, c.heading, d.doc_id, d.doc_type, d.path, d.title, "
                "d.metadata FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id "
                "WHERE c.id = ANY(%s)",
                ([cid for cid, _, _ in ranked],),
            )
        }
        hits = []
        for cid, _, score in ranked:
            row = rows[cid]
            metadata: dict[str, Any] = dict(row["metadata"])
            metadata.update(
                {
                    "doc_type": row["doc_type"],
                    "path": row["path"],
                    "title": row["title"],
                    "heading": row["heading"],
                    "workspace_id": self.workspace_id,
                }
            )
            hits.append(
                RetrievalHit(
                    text=row["text"],
                    score=float(score),
                    source=SOURCE,
                    doc_id=row["doc_id"],
                    metadata=metadata,
                    chunk_id=str(cid),
                )
            )
        return hits


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
        values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
        if not values:
            raise RetrieverError(SOURCE, f"filter '{key}' has no allowed value")
        for v in values:
            if not isinstance(v, str | int | float | bool):
                raise RetrieverError(
                    SOURCE,
                    f"filter '{key}': values must be strings or numbers, got {type(v).__name__}",
                )
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


__all__ = ["PgWorkspaceIndex"]
