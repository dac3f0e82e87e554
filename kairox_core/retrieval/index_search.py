"""Searching the SQLite workspace index: keyword (FTS5 bm25), vector (sqlite-vec, or the
space's ANN graph) and hybrid (both, fused), with filters; and any index as a retriever.

``IndexSearch`` is the search half of ``WorkspaceRagIndex`` (index.py holds the
writing half and the connection); ``WorkspaceIndexRetriever`` adapts any
``WorkspaceIndex`` (the SQLite one, or a storage backend's own) to a
``WorkspaceRetriever``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kairox_core.capabilities import IndexCapabilities, RetrieverCapabilities, empty_probe
from kairox_core.errors import KairoxUserError
from kairox_core.retrieval import ann
from kairox_core.retrieval.base import EmbeddingBackend, RetrievalHit, RetrieverError
from kairox_core.retrieval.fts import query_terms, terms_expression
from kairox_core.retrieval.index_common import (
    SOURCE,
    Ranked,
    build_hits,
    collapse,
    filter_values,
    fuse_rankings,
)
from kairox_core.retrieval.index_schema import FTS_TOKENIZE, VEC_MAX_K, pack_vector
from kairox_core.retrieval.keyword_terms import TermSelector

MODES = ("hybrid", "vector", "keyword")
_HIT_COLUMNS = ("text", "heading", "doc_id", "doc_type", "path", "title", "metadata")
_META_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class IndexSearch:
    """Search over the index's connection; mixed into ``WorkspaceRagIndex``, which sets
    these attributes and provides the bookkeeping methods declared below."""

    conn: Any
    workspace_id: str
    backend: EmbeddingBackend
    rrf_k: int
    keyword_weight: float
    vector_weight: float
    candidates: int
    _lock: threading.RLock
    _term_selector: TermSelector | None

    if TYPE_CHECKING:

        @property
        def _vec_table(self) -> str: ...
        def _check_backend(self) -> None: ...
        def _is_empty(self) -> bool: ...
        def _has_vec_table(self, table: str) -> bool: ...
        def ann_space(self) -> ann.AnnSpace | None: ...

    # --- searching -------------------------------------------------------------------

    def search(
        self, query: str, k: int = 8, mode: str = "hybrid", filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        """The best ``k`` documents (best chunk of each) for ``query``."""
        if mode not in MODES:
            raise KairoxUserError(f"unknown search mode '{mode}'; use one of: {', '.join(MODES)}")
        if k <= 0:
            return []
        where, args, push = _filter_sql(filters or {})
        with self._lock:
            if mode == "keyword":
                return self._hits(self._keyword(query, k, where, args))
            self._check_backend()
            if self._is_empty():  # the default workspace of a chat: no files indexed
                return []
            if mode == "vector":
                return self._hits(self._vector(query, k, where, args, push))
            keyword, vector = self._rankings(query, max(k, self.candidates), where, args, push)
            fused = fuse_rankings(
                [(self.keyword_weight, keyword), (self.vector_weight, vector)],
                rrf_k=self.rrf_k,
                limit=k,
            )
            return self._hits(fused)

    def rankings(
        self, query: str, n: int, filters: Mapping[str, Any] | None = None
    ) -> tuple[Ranked, Ranked]:
        """The keyword and vector rankings hybrid search fuses (for tuning and tracing)."""
        where, args, push = _filter_sql(filters or {})
        with self._lock:
            self._check_backend()
            return self._rankings(query, n, where, args, push)

    def _rankings(
        self,
        query: str,
        n: int,
        where: str,
        args: list[object],
        push: tuple[str, list[object]] | None,
    ) -> tuple[Ranked, Ranked]:
        return self._keyword(query, n, where, args), self._vector(query, n, where, args, push)

    def _keyword(
        self, query: str, k: int, where: str, args: list[object]
    ) -> list[tuple[int, int, float]]:
        words = self._keyword_terms(query)
        terms = terms_expression(words)
        if terms is None:
            return []
        # the workspace is a term in its own column (weight 0 in bm25): FTS5 intersects
        # doclists itself, so no row outside the workspace is ever read
        others = self.conn.execute(
            "SELECT 1 FROM rag_spaces WHERE workspace_id != ? LIMIT 1", (self.workspace_id,)
        ).fetchone()
        if others is None:  # the only workspace here: the workspace term would filter nothing
            expr = terms  # (a "kxws..." token in a prompt may match ws_token: weight 0)
        else:
            token = self.conn.execute(
                "SELECT 'kxws' || lower(hex(?))", (self.workspace_id,)
            ).fetchone()[0]
            cols = terms_expression(words, columns=["text", "heading"])
            expr = f'{cols} AND ws_token : "{token}"'
        rank = "bm25(rag_fts, 1.0, 1.0, 0.0)"
        if where:  # other filters need the document row of every match
            sql = (
                "SELECT c.id, c.document_id, " + rank + " AS s FROM rag_fts "
                "JOIN rag_chunks c ON c.id = rag_fts.rowid "
                "JOIN rag_documents d ON d.id = c.document_id "
                f"WHERE rag_fts MATCH ?{where} ORDER BY s LIMIT ?"
            )
        else:  # rank in FTS5 alone (the raw query), then read only the top rows
            sql = f"SELECT rowid, {rank} AS s FROM rag_fts WHERE rag_fts MATCH ? ORDER BY s LIMIT ?"

        def fetch(limit: int) -> list[tuple[int, int, float]]:
            params = (expr, *args, limit)
            rows = self.conn.execute(sql, params).fetchall()
            if where:
                return [(r[0], r[1], -float(r[2])) for r in rows]
            ids = [r[0] for r in rows]
            docs = (
                dict(
                    self.conn.execute(
                        "SELECT id, document_id FROM rag_chunks INDEXED BY rag_chunks_owner "
                        "WHERE id IN "
                        f"({','.join('?' * len(ids))})",
                        ids,
                    )
                )
                if ids
                else {}
            )
            return [(r[0], docs[r[0]], -float(r[1])) for r in rows]

        return collapse(fetch, k, max_limit=VEC_MAX_K)

    def _keyword_terms(self, query: str) -> list[str]:
        """The query's terms worth a doclist read (keyword_terms.py: the weightless
        ones dropped, the rarest ``MAX_TERMS`` kept); the counts are cached per index."""
        return self._selector().select(query_terms(query))

    def _selector(self) -> TermSelector:
        if self._term_selector is None:
            self._term_selector = TermSelector(self.conn, "rag_fts", "rag_chunks", FTS_TOKENIZE)
        return self._term_selector

    def refresh_term_stats(self, *, force: bool = False) -> bool:
        """Store the counts keyword queries read for common terms, if missing or the
        index has grown by a quarter since (keyword_terms.py); whether it did. For bulk
        and background indexing: it reads the whole FTS vocabulary."""
        with self._lock:
            return self._selector().refresh_stats(force=force)

    def _vector(
        self,
        query: str,
        k: int,
        where: str,
        args: list[object],
        push: tuple[str, list[object]] | None,
    ) -> list[tuple[int, int, float]]:
        table = self._vec_table
        if not self._has_vec_table(table):
            return []
        qvec = self.backend.embed_query(query)
        if not any(qvec):  # no feature at all (punctuation only): cosine is undefined
            return []
        blob = pack_vector(qvec)
        if push is None:  # filters vec0 cannot apply: exact scan of the matching chunks
            rows = self.conn.execute(
                f"SELECT c.id, c.document_id, vec_distance_cosine(v.embedding, ?) AS dist "
                f"FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id "
                f"JOIN {table} v ON v.rowid = c.id WHERE c.workspace_id = ?{where} "
                f"ORDER BY dist LIMIT ?",
                (blob, self.workspace_id, *args, k * 8),
            ).fetchall()
            return collapse(
                lambda limit: [
                    (r[0], r[1], 1.0 - float(r[2])) for r in rows[:limit] if r[2] is not None
                ],
                k,
                max_limit=VEC_MAX_K,
            )  # NULL: a chunk with an all-zero vector (no features)
        vwhere, vargs = push
        graph = self.ann_space() if not vwhere else None
        ready = graph is not None and graph.ready

        def fetch(limit: int) -> list[tuple[int, int, float]]:
            near = graph.search(qvec, limit) if graph is not None else None
            if near is not None:  # a large space: its HNSW graph, not an exact scan
                return self._with_documents(near)
            rows = self.conn.execute(
                f"WITH knn AS (SELECT rowid AS id, distance FROM {table} "
                f"WHERE embedding MATCH ? AND k = ? AND workspace_id = ?{vwhere}) "
                f"SELECT knn.id, c.document_id, knn.distance FROM knn "
                f"JOIN rag_chunks c ON c.id = knn.id ORDER BY knn.distance",
                (blob, limit, self.workspace_id, *vargs),
            ).fetchall()
            return [(r[0], r[1], 1.0 - float(r[2])) for r in rows if r[2] is not None]

        # a graph's cost grows with the results asked for: the documents wanted and a
        # few more (a document of several chunks fetches more, as for the exact scan)
        return collapse(fetch, k, max_limit=VEC_MAX_K, first=k + 8 if ready else None)

    def _with_documents(self, near: Sequence[tuple[int, float]]) -> list[tuple[int, int, float]]:
        """(chunk id, document id, similarity) for ANN results, in their order; a
        chunk gone since (or of another space) is left out."""
        if not near:
            return []
        ids = [cid for cid, _ in near]
        docs = {
            r[0]: r[1]
            for r in self.conn.execute(  # by id, from the covering index (migration 5)
                "SELECT id, document_id, workspace_id FROM rag_chunks "
                f"INDEXED BY rag_chunks_owner WHERE id IN ({','.join('?' * len(ids))})",
                ids,
            )
            if r[2] == self.workspace_id
        }
        return [(cid, docs[cid], 1.0 - dist) for cid, dist in near if cid in docs]

    def _hits(self, ranked: Sequence[tuple[int, int, float]]) -> list[RetrievalHit]:
        """Hydrate (chunk id, document id, score) triples into hits, in one query."""
        if not ranked:
            return []
        ids = [cid for cid, _, _ in ranked]
        rows = {
            r[0]: dict(zip(_HIT_COLUMNS, r[1:], strict=True))
            for r in self.conn.execute(
                "SELECT c.id, c.text, c.heading, d.doc_id, d.doc_type, d.path, d.title, d.metadata "
                "FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id "
                f"WHERE c.id IN ({','.join('?' * len(ids))})",
                ids,
            )
        }
        return build_hits(ranked, rows, self.workspace_id)


def _filter_sql(
    filters: Mapping[str, Any],
) -> tuple[str, list[Any], tuple[str, list[object]] | None]:
    """SQL for ``filters`` over ``d`` (documents) and, when vec0 can apply them all, for it.

    ``path`` takes glob patterns; ``doc_type`` and ``doc_id`` exact values; any other
    key matches the document's metadata. A value may be a list of allowed values.
    """
    where: list[str] = []
    args: list[object] = []
    vwhere: list[str] = []
    vargs: list[object] = []
    pushable = True
    for key, value in filters.items():
        values = filter_values(key, value)
        marks = ",".join("?" * len(values))
        if key == "path":
            where.append("(" + " OR ".join("d.path GLOB ?" for _ in values) + ")")
            args += [str(v) for v in values]
            pushable = False  # sqlite-vec metadata filters do not take GLOB
        elif key in ("doc_type", "doc_id"):
            where.append(f"d.{key} IN ({marks})")
            args += [str(v) for v in values]
            if key == "doc_type":
                vwhere.append(f"doc_type IN ({marks})")
                vargs += [str(v) for v in values]
            else:
                pushable = False
        elif _META_KEY.match(key):
            where.append(f"json_extract(d.metadata, '$.\"{key}\"') IN ({marks})")
            args += values
            pushable = False
        else:
            raise RetrieverError(
                SOURCE,
                f"cannot filter on '{key}': metadata keys are letters, digits, '_', '.' and '-'",
            )
    sql = "".join(" AND " + w for w in where)
    push = ("".join(" AND " + w for w in vwhere), vargs) if pushable else None
    return sql, args, push


class SearchableIndex(Protocol):
    """What ``WorkspaceIndexRetriever`` needs of an index (a ``WorkspaceIndex`` has it)."""

    @property
    def capabilities(self) -> IndexCapabilities: ...
    def search(
        self, query: str, k: int = 8, mode: str = "hybrid", filters: Any = None
    ) -> list[RetrievalHit]: ...
    def close(self) -> None: ...


class WorkspaceIndexRetriever:
    """A space's index (any ``WorkspaceIndex``) as a ``WorkspaceRetriever``."""

    kind = "workspace"
    capabilities = RetrieverCapabilities()

    def __init__(self, index: SearchableIndex, *, name: str = SOURCE, mode: str = "hybrid") -> None:
        self.index = index
        self.name = name
        self.mode = mode

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        from kairox_core.retrieval.threads import run_blocking

        probe = empty_probe(self.index)  # a chat's workspace: no files, found on the
        if probe is not None and probe.surely_empty():  # loop: no thread hop for nothing
            return []
        return await run_blocking(self.index.search, query, k, self.mode, filters)

    async def close(self) -> None:
        self.index.close()
