"""WorkspaceRagIndex: chunks in SQLite, text in FTS5 (bm25), vectors in sqlite-vec.

One Kairox database holds every workspace's index; each query is confined to its
workspace (the vec0 partition key and a column on every chunk). The index records
the embedding backend and dimension that built a workspace's vectors and refuses to
mix in another (``kairox index --rebuild`` re-embeds). Writes are one transaction per
batch, so a crash leaves the previous state, never half a document.

This module holds the index itself (the connection, the backend bookkeeping and the
writes); its tables are in index_schema.py, the documents it takes in documents.py,
search in index_search.py, and what it shares with other backends' indexes in
index_common.py. The names those modules define are re-exported here, where callers
and kairox_core.store.indexing have always imported them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox_core.capabilities import IndexCapabilities
from kairox_core.retrieval import ann
from kairox_core.retrieval.base import EmbeddingBackend
from kairox_core.retrieval.chunking import Chunker
from kairox_core.retrieval.documents import (
    DocumentInfo,
    DocumentInput,
    IndexBackendMismatch,
    doc_type_for,
    file_document,
)
from kairox_core.retrieval.index_common import (
    SOURCE,
    batches,
    chunk_vectors,
    doc_hash,
    embed_texts,
    last_per_doc_id,
    metadata_json,
    with_context,
)
from kairox_core.retrieval.index_common import (
    statuses as doc_statuses,
)
from kairox_core.retrieval.index_schema import (
    COMPONENT,
    FTS_TOKENIZE,
    MIGRATIONS,
    VEC_MAX_K,
    pack_vector,
)
from kairox_core.retrieval.index_search import MODES, IndexSearch, WorkspaceIndexRetriever
from kairox_core.retrieval.keyword_terms import TermSelector
from kairox_core.store.connection import connect, transaction
from kairox_core.store.database import lock_for
from kairox_core.store.migrations import migrate

if TYPE_CHECKING:
    from kairox_core.config import KairoxConfig

_known_tables: dict[tuple[int, str], Any] = {}  # (id(conn), table) -> conn: it exists


class WorkspaceRagIndex(IndexSearch):
    """The workspace's documents, searchable by keyword, vector or both (hybrid)."""

    capabilities = IndexCapabilities(term_stats=True, ann=True, empty_probe=True, files=True)

    def __init__(
        self,
        database: str | os.PathLike[str] | Any,
        workspace_id: str = "default",
        backend: EmbeddingBackend | None = None,
        *,
        chunk_tokens: int = 512,
        chunk_overlap: int = 64,
        rrf_k: int = 60,
        keyword_weight: float = 1.0,
        vector_weight: float = 1.0,
        candidates: int = 100,
        chunker: Chunker | None = None,
    ) -> None:
        if isinstance(database, str | os.PathLike):
            self.conn = connect(database)
            self._owns_conn = True
        else:
            self.conn = database
            self._owns_conn = False
        if backend is None:
            from kairox_core.retrieval.embeddings import load_embedding_backend

            backend = load_embedding_backend("hashing")
        self.workspace_id = workspace_id
        self.backend = backend
        self.chunker = chunker or Chunker(chunk_tokens, chunk_overlap)
        self.rrf_k = rrf_k
        self.keyword_weight = keyword_weight
        self.vector_weight = vector_weight
        self.candidates = candidates
        self.embed_calls = 0
        self.embedded_chunks = 0
        self._term_selector: TermSelector | None = None
        self._fresh: list[tuple[int, bytes]] = []  # (log id, vector) written, not committed
        # One lock per connection: the shared database's when the index is on it.
        self._lock = lock_for(self.conn) if not self._owns_conn else threading.RLock()
        with self._lock:  # its BEGIN must not land inside another thread's transaction
            migrate(self.conn, COMPONENT, MIGRATIONS)

    @property
    def lock(self) -> threading.RLock:
        """The lock guarding this index's connection (re-entrant)."""
        return self._lock

    @classmethod
    def from_config(
        cls,
        config: KairoxConfig,
        database: str | os.PathLike[str] | Any,
        workspace_id: str = "default",
        backend: EmbeddingBackend | None = None,
    ) -> WorkspaceRagIndex:
        """An index set up from a ``KairoxConfig``'s ``[retrieval]`` section."""
        from kairox_core.retrieval.embeddings import load_embedding_backend

        r = config.retrieval
        return cls(
            database,
            workspace_id,
            backend or load_embedding_backend(r),
            chunk_tokens=r.chunk_tokens,
            chunk_overlap=r.chunk_overlap,
            rrf_k=r.rrf_k,
            keyword_weight=r.keyword_weight,
            vector_weight=r.vector_weight,
            candidates=r.hybrid_candidates,
        )

    def close(self) -> None:
        if self._owns_conn:
            ann.forget(self.conn)
            self.conn.close()

    def ann_space(self) -> ann.AnnSpace | None:
        """The space's ANN graph state (retrieval/ann.py); None without usearch."""
        if not ann.available():
            return None
        with self._lock:
            return ann.space_for(self.conn, self._lock, self.workspace_id, self._dimension)

    def build_ann(self, threads: int = 0) -> bool:
        """Build (or merge) the space's ANN graph now, in this thread: after a bulk
        load, so the next search finds it on disk. False when the space is small or
        usearch is missing (searches then scan exactly). ``threads``: insertion threads
        (0: every core; 1 builds the same graph every time, as tests need)."""
        space = self.ann_space()
        if space is None or not self._has_vec_table(self._vec_table):
            return False
        space.wait()
        return space.build(threads=threads)

    def as_retriever(self, name: str = SOURCE, mode: str = "hybrid") -> WorkspaceIndexRetriever:
        return WorkspaceIndexRetriever(self, name=name, mode=mode)

    # --- backend bookkeeping ---------------------------------------------------------

    @property
    def _vec_table(self) -> str:
        return f"rag_vec_{int(self.backend.dimension)}"

    @property
    def _dimension(self) -> int:
        return int(self.backend.dimension)

    def recorded_backend(self) -> tuple[str, int] | None:
        row = self.conn.execute(
            "SELECT backend, dimension FROM rag_spaces WHERE workspace_id = ?", (self.workspace_id,)
        ).fetchone()
        return (row[0], int(row[1])) if row else None

    def check_backend(self) -> None:
        """Raise ``IndexBackendMismatch`` if the workspace was embedded with another
        backend or dimension: until ``rebuild`` nothing can be searched, and adding
        files would mix two vector spaces."""
        with self._lock:
            self._check_backend()

    def _check_backend(self) -> None:
        recorded = self.recorded_backend()
        current = (self.backend.name, int(self.backend.dimension))
        if recorded is not None and recorded != current:
            raise IndexBackendMismatch(
                f"workspace '{self.workspace_id}' was indexed with embedding backend "
                f"'{recorded[0]}' (dimension {recorded[1]}), but '{current[0]}' (dimension "
                f"{current[1]}) is configured; run `kairox index --rebuild --workspace "
                f"{self.workspace_id}` to re-embed it, or set [retrieval] backend back"
            )

    def _ensure_space(self) -> None:
        """Inside a transaction: the vec0 table exists and the backend is recorded."""
        dim = int(self.backend.dimension)
        self.conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {self._vec_table} USING vec0("
            f" workspace_id TEXT PARTITION KEY, embedding float[{dim}] distance_metric=cosine,"
            f" doc_type TEXT, path TEXT)"
        )
        self.conn.execute(
            "INSERT INTO rag_spaces(workspace_id, backend, dimension, updated_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT(workspace_id) DO UPDATE SET "
            "backend = excluded.backend, dimension = excluded.dimension, "
            "updated_at = excluded.updated_at",
            (self.workspace_id, self.backend.name, dim, time.time()),
        )

    def _has_vec_table(self, table: str) -> bool:
        """Whether ``table`` exists; a yes is remembered per connection (vector tables
        are never dropped, and the schema lookup scans sqlite_master)."""
        key = (id(self.conn), table)
        if _known_tables.get(key) is self.conn:
            return True
        found = (
            self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone()
            is not None
        )
        if found:
            if len(_known_tables) > 1024:  # (it keeps closed connections' objects alive)
                _known_tables.clear()
            _known_tables[key] = self.conn
        return found

    def surely_empty(self) -> bool:
        """True when the space has no chunk, found without waiting: the probe (one index
        lookup) runs only if the connection's lock is free at once, so the event
        loop can ask it without waiting behind a writer; False when busy (search then)."""
        from kairox_core.retrieval.threads import if_free

        return if_free(self._lock, self._is_empty) is True

    def _is_empty(self) -> bool:
        """No chunk in the space (one index probe): every search finds nothing."""
        return (
            self.conn.execute(
                "SELECT 1 FROM rag_chunks WHERE workspace_id = ? LIMIT 1", (self.workspace_id,)
            ).fetchone()
            is None
        )

    def _embed(self, items: Sequence[tuple[str, str, str]]) -> list[bytes]:
        """Vectors for (text, heading, context) chunks, in one backend call."""
        if not items:
            return []
        self.embed_calls += 1
        self.embedded_chunks += len(items)
        vectors = self.backend.embed_documents(embed_texts(items))
        return [pack_vector(v) for v in chunk_vectors(items, vectors)]

    # --- writing ---------------------------------------------------------------------

    def add_text(
        self,
        doc_id: str,
        text: str,
        *,
        doc_type: str = "text",
        path: str = "",
        title: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Index (or re-index) one string; returns "added", "updated" or "unchanged"."""
        doc = DocumentInput(doc_id, text, doc_type, path, title, dict(metadata or {}))
        return self.add_documents([doc])[0]

    def add_file(
        self,
        path: str | os.PathLike[str],
        *,
        doc_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Index one text file (by resolved path); "unchanged" costs a stat, no read."""
        p = Path(path).expanduser().resolve()
        st = p.stat()
        key = doc_id or str(p)
        with self._lock:
            row = self.conn.execute(
                "SELECT mtime, size FROM rag_documents WHERE workspace_id = ? AND doc_id = ?",
                (self.workspace_id, key),
            ).fetchone()
        if row is not None and row[0] == st.st_mtime and row[1] == st.st_size:
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
        statuses: list[str] = []
        for batch in batches(docs, batch_size):
            statuses += self._add_batch(batch)
            if progress:
                progress(len(batch))
        return statuses

    def _add_batch(self, batch: list[DocumentInput]) -> list[str]:
        """One transaction. A doc id given twice is applied in order (the last one is
        stored; statuses as if each were added in turn), and a row another process
        wrote since the plan was made is updated in place (an upsert, never a
        UNIQUE failure): the plan reads outside the write lock, the write re-reads."""
        docs: list[DocumentInput] = last_per_doc_id(batch)
        with self._lock:
            self._check_backend()
            existing: dict[str, tuple[int, str, str, str]] = {}
            for doc in docs:
                row = self._document_row(doc.doc_id)
                if row is not None:
                    existing[doc.doc_id] = row
            plan: list[tuple[DocumentInput, str, list[Any] | None]] = []
            for doc in docs:
                old = existing.get(doc.doc_id)
                dhash = doc_hash(doc.title, doc.text, doc.context)
                meta = metadata_json(doc.metadata)
                if old is not None and old[1] == dhash:
                    same = old[2] == meta and old[3] == doc.doc_type and doc.mtime is None
                    plan.append((doc, dhash, None if same else []))
                    continue
                plan.append(
                    (
                        doc,
                        dhash,
                        [with_context(c, doc.context) for c in self.chunker.chunk(doc.text)]
                        if doc.text.strip()
                        else [],
                    )
                )
            statuses = doc_statuses(batch, {k: v[1] for k, v in existing.items()})
            # vectors already embedded for identical chunk text are reused, not recomputed
            wanted = {c.content_hash for _, _, chunks in plan if chunks for c in chunks}
            known = self._vectors_by_hash(wanted)
            missing: dict[str, tuple[str, str, str]] = {}
            for doc, _, planned in plan:
                for c in planned or []:
                    if c.content_hash not in known:
                        missing.setdefault(c.content_hash, (c.text, c.heading, doc.context))
            fresh = self._embed(list(missing.values()))
            known.update(zip(missing, fresh, strict=True))
            self._fresh.clear()
            with transaction(self.conn):
                self._ensure_space()
                for doc, dhash, chunks in plan:
                    if chunks is None:
                        continue
                    now = self._document_row(doc.doc_id)  # under the write lock
                    old = existing.get(doc.doc_id)
                    if now is not None and now[1] == dhash:  # this text, stored here or
                        self._touch(now[0], doc)  # by another process since the plan
                    elif old is None or old[1] != dhash:
                        self._write(doc, dhash, chunks, now[0] if now else None, known)
                    # else: planned as a touch, but another process has since stored a
                    # newer text: that one stands (it is the later write)
            self._hand_to_ann()
            return statuses

    def _document_row(self, doc_id: str) -> tuple[int, str, str, str] | None:
        row = self.conn.execute(
            "SELECT id, content_hash, metadata, doc_type FROM rag_documents "
            "WHERE workspace_id = ? AND doc_id = ?",
            (self.workspace_id, doc_id),
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])

    def _vectors_by_hash(self, hashes: set[str]) -> dict[str, bytes]:
        if not hashes or not self._has_vec_table(self._vec_table):
            return {}
        found: dict[str, bytes] = {}
        items = sorted(hashes)
        for start in range(0, len(items), 500):
            part = items[start : start + 500]
            marks = ",".join("?" * len(part))
            for h, blob in self.conn.execute(
                f"SELECT c.content_hash, v.embedding FROM rag_chunks c "
                f"JOIN {self._vec_table} v ON v.rowid = c.id "
                f"WHERE c.workspace_id = ? AND c.content_hash IN ({marks})",
                (self.workspace_id, *part),
            ):
                found.setdefault(h, bytes(blob))
        return found

    def _touch(self, document_id: int, doc: DocumentInput) -> None:
        """Same text, new metadata or doc type: update them without re-embedding."""
        meta = metadata_json(doc.metadata)
        self.conn.execute(
            "UPDATE rag_documents SET metadata = ?, doc_type = ?, mtime = ?, size = ?, "
            "updated_at = ? WHERE id = ?",
            (meta, doc.doc_type, doc.mtime, doc.size, time.time(), document_id),
        )
        table = self._vec_table
        rows = self.conn.execute(
            f"SELECT v.rowid, v.embedding, v.doc_type FROM {table} v WHERE v.rowid IN "
            f"(SELECT id FROM rag_chunks WHERE document_id = ?)",
            (document_id,),
        ).fetchall()
        for rowid, blob, old_type in rows:  # vec0 cannot UPDATE here: delete and re-insert
            if old_type == doc.doc_type:
                continue
            self.conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
            self.conn.execute(
                f"INSERT INTO {table}(rowid, workspace_id, embedding, doc_type, path) "
                f"VALUES (?, ?, ?, ?, ?)",
                (rowid, self.workspace_id, bytes(blob), doc.doc_type, doc.path),
            )

    def _delete_chunks(self, document_id: int) -> None:
        if self._has_vec_table(self._vec_table):
            ann.log_deleted_document(
                self.conn, self.workspace_id, int(self.backend.dimension), document_id
            )
            self.conn.execute(
                f"DELETE FROM {self._vec_table} WHERE rowid IN "
                f"(SELECT id FROM rag_chunks WHERE document_id = ?)",
                (document_id,),
            )
        self.conn.execute("DELETE FROM rag_chunks WHERE document_id = ?", (document_id,))

    def _write(
        self,
        doc: DocumentInput,
        dhash: str,
        chunks: list[Any],
        document_id: int | None,
        vectors: Mapping[str, bytes],
    ) -> None:
        meta = metadata_json(doc.metadata)
        now = time.time()
        if document_id is not None:
            self._delete_chunks(document_id)
            self.conn.execute(
                "UPDATE rag_documents SET origin = ?, doc_type = ?, path = ?, title = ?, "
                "metadata = ?, content_hash = ?, mtime = ?, size = ?, updated_at = ? "
                "WHERE id = ?",
                (
                    doc.origin,
                    doc.doc_type,
                    doc.path,
                    doc.title,
                    meta,
                    dhash,
                    doc.mtime,
                    doc.size,
                    now,
                    document_id,
                ),
            )
        else:
            document_id = self.conn.execute(
                "INSERT INTO rag_documents(workspace_id, doc_id, origin, doc_type, path, title, "
                "metadata, content_hash, mtime, size, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.workspace_id,
                    doc.doc_id,
                    doc.origin,
                    doc.doc_type,
                    doc.path,
                    doc.title,
                    meta,
                    dhash,
                    doc.mtime,
                    doc.size,
                    now,
                ),
            ).lastrowid
        for ord_, c in enumerate(chunks):
            chunk_id = self.conn.execute(
                "INSERT INTO rag_chunks(document_id, workspace_id, ord, text, heading, tokens, "
                "content_hash, context) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    document_id,
                    self.workspace_id,
                    ord_,
                    c.text,
                    c.heading,
                    c.tokens,
                    c.content_hash,
                    doc.context,
                ),
            ).lastrowid
            self.conn.execute(
                f"INSERT INTO {self._vec_table}(rowid, workspace_id, embedding, doc_type, path) "
                f"VALUES (?, ?, ?, ?, ?)",
                (chunk_id, self.workspace_id, vectors[c.content_hash], doc.doc_type, doc.path),
            )
            entry = ann.log_added(self.conn, self.workspace_id, self._dimension, int(chunk_id))
            self._fresh.append((entry, vectors[c.content_hash]))

    def _hand_to_ann(self) -> None:
        """After the commit: the vectors just written, to this process's ANN graph of
        the space (its catch-up then reads no vector back from vec0, where a lookup by
        rowid reads a whole chunk of 1,024 vectors)."""
        fresh, self._fresh = self._fresh, []
        if fresh and ann.available():
            ann.space_for(self.conn, self._lock, self.workspace_id, self._dimension).remember(fresh)

    def delete(self, doc_id: str) -> bool:
        """Remove a document and its chunks; False when it was not indexed."""
        return self.delete_many([doc_id]) == 1

    def delete_many(self, doc_ids: Iterable[str]) -> int:
        removed = 0
        with self._lock, transaction(self.conn):
            for doc_id in doc_ids:
                row = self.conn.execute(
                    "SELECT id FROM rag_documents WHERE workspace_id = ? AND doc_id = ?",
                    (self.workspace_id, doc_id),
                ).fetchone()
                if row is None:
                    continue
                self._delete_chunks(row[0])
                self.conn.execute("DELETE FROM rag_documents WHERE id = ?", (row[0],))
                removed += 1
        return removed

    def documents(self, *, origin: str | None = None) -> list[DocumentInfo]:
        sql = (
            "SELECT d.doc_id, d.doc_type, d.path, d.origin, d.content_hash, "
            "(SELECT count(*) FROM rag_chunks c WHERE c.document_id = d.id) "
            "FROM rag_documents d WHERE d.workspace_id = ?"
        )
        args: list[object] = [self.workspace_id]
        if origin is not None:
            sql += " AND d.origin = ?"
            args.append(origin)
        with self._lock:
            rows = self.conn.execute(sql + " ORDER BY d.doc_id", args).fetchall()
        return [DocumentInfo(r[0], r[1], r[2], r[3], r[4], int(r[5])) for r in rows]

    def optimize(self) -> None:
        """Merge the FTS5 index's segments (after a large indexing run: faster queries)."""
        with self._lock, transaction(self.conn):
            self.conn.execute("INSERT INTO rag_fts(rag_fts) VALUES ('optimize')")

    def chunk_count(self) -> int:
        with self._lock:
            row = self.conn.execute(
                "SELECT count(*) FROM rag_chunks WHERE workspace_id = ?", (self.workspace_id,)
            ).fetchone()
        return int(row[0])

    def rebuild(
        self, *, batch_size: int = 256, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Re-embed every chunk of the workspace with the current backend; returns chunks."""
        with self._lock:
            rows = self.conn.execute(
                "SELECT c.id, c.text, c.heading, d.doc_type, d.path, c.context FROM rag_chunks c "
                "JOIN rag_documents d ON d.id = c.document_id WHERE c.workspace_id = ? "
                "ORDER BY c.id",
                (self.workspace_id,),
            ).fetchall()
            blobs: list[bytes] = []
            for start in range(0, len(rows), batch_size):
                part = rows[start : start + batch_size]
                blobs += self._embed([(r[1], r[2], r[5]) for r in part])
                if progress:
                    progress(min(start + batch_size, len(rows)), len(rows))
            old = self.recorded_backend()
            with transaction(self.conn):
                if old is not None and self._has_vec_table(f"rag_vec_{old[1]}"):
                    self.conn.execute(
                        f"DELETE FROM rag_vec_{old[1]} WHERE workspace_id = ?", (self.workspace_id,)
                    )
                self._ensure_space()
                self.conn.execute(
                    f"DELETE FROM {self._vec_table} WHERE workspace_id = ?", (self.workspace_id,)
                )
                ann.log_reset(self.conn, self.workspace_id, int(self.backend.dimension))
                if old is not None and old[1] != int(self.backend.dimension):
                    ann.log_reset(self.conn, self.workspace_id, old[1])
                self.conn.executemany(
                    f"INSERT INTO {self._vec_table}(rowid, workspace_id, embedding, doc_type, "
                    f"path) VALUES (?, ?, ?, ?, ?)",
                    [
                        (r[0], self.workspace_id, b, r[3], r[4])
                        for r, b in zip(rows, blobs, strict=True)
                    ],
                )
            return len(rows)


__all__ = [
    "COMPONENT",
    "FTS_TOKENIZE",
    "MIGRATIONS",
    "MODES",
    "VEC_MAX_K",
    "DocumentInfo",
    "DocumentInput",
    "IndexBackendMismatch",
    "WorkspaceIndexRetriever",
    "WorkspaceRagIndex",
    "doc_type_for",
    "file_document",
    "pack_vector",
]
