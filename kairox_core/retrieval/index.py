"""WorkspaceRagIndex: chunks in SQLite, text in FTS5 (bm25), vectors in sqlite-vec.

One Kairox database holds every workspace's index; each query is confined to its
workspace (the vec0 partition key and a column on every chunk). The index records
the embedding backend and dimension that built a workspace's vectors and refuses to
mix in another (``kairox index --rebuild`` re-embeds). Writes are one transaction per
batch, so a crash leaves the previous state, never half a document.
"""

from __future__ import annotations

import json
import os
import re
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox_core.capabilities import IndexCapabilities, RetrieverCapabilities, empty_probe
from kairox_core.errors import KairoxUserError
from kairox_core.retrieval import ann
from kairox_core.retrieval.base import EmbeddingBackend, RetrievalHit, RetrieverError
from kairox_core.retrieval.chunking import Chunker
from kairox_core.retrieval.fts import query_terms, terms_expression
from kairox_core.retrieval.index_common import (
    SOURCE,
    Ranked,
    doc_hash,
    filter_values,
    fuse_rankings,
    mean_vector,
    with_context,
)
from kairox_core.retrieval.index_common import (
    statuses as doc_statuses,
)
from kairox_core.retrieval.keyword_terms import STATS_SCHEMA, TermSelector
from kairox_core.store.connection import connect, transaction
from kairox_core.store.database import lock_for
from kairox_core.store.migrations import migrate

if TYPE_CHECKING:
    from kairox_core.store.protocol import WorkspaceIndex

COMPONENT = "retrieval"
MODES = ("hybrid", "vector", "keyword")
VEC_MAX_K = 4096  # sqlite-vec's limit on k
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"  # rag_fts's tokenizer (migrations)

MIGRATIONS = [
    """
    CREATE TABLE rag_spaces (
        workspace_id TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        dimension INTEGER NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE rag_documents (
        id INTEGER PRIMARY KEY,
        workspace_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        origin TEXT NOT NULL DEFAULT 'text',
        doc_type TEXT NOT NULL,
        path TEXT NOT NULL DEFAULT '',
        title TEXT NOT NULL DEFAULT '',
        metadata TEXT NOT NULL DEFAULT '{}',
        content_hash TEXT NOT NULL,
        mtime REAL,
        size INTEGER,
        updated_at REAL NOT NULL,
        UNIQUE (workspace_id, doc_id)
    );
    CREATE TABLE rag_chunks (
        id INTEGER PRIMARY KEY,
        document_id INTEGER NOT NULL REFERENCES rag_documents(id) ON DELETE CASCADE,
        workspace_id TEXT NOT NULL,
        ord INTEGER NOT NULL,
        text TEXT NOT NULL,
        heading TEXT NOT NULL DEFAULT '',
        tokens INTEGER NOT NULL,
        content_hash TEXT NOT NULL
    );
    CREATE INDEX rag_chunks_document ON rag_chunks(document_id);
    CREATE INDEX rag_chunks_hash ON rag_chunks(workspace_id, content_hash);
    CREATE VIRTUAL TABLE rag_fts USING fts5(
        text, heading, content='rag_chunks', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER rag_chunks_ai AFTER INSERT ON rag_chunks BEGIN
        INSERT INTO rag_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading);
    END;
    CREATE TRIGGER rag_chunks_ad AFTER DELETE ON rag_chunks BEGIN
        INSERT INTO rag_fts(rag_fts, rowid, text, heading)
        VALUES ('delete', old.id, old.text, old.heading);
    END;
    """,
    # 2: the workspace becomes an FTS5 term (column ws_token), so keyword search never
    # reads rows of other workspaces
    """
    DROP TRIGGER rag_chunks_ai;
    DROP TRIGGER rag_chunks_ad;
    DROP TABLE rag_fts;
    ALTER TABLE rag_chunks ADD COLUMN ws_token TEXT
        GENERATED ALWAYS AS ('kxws' || lower(hex(workspace_id))) VIRTUAL;
    CREATE VIRTUAL TABLE rag_fts USING fts5(
        text, heading, ws_token, content='rag_chunks', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2'
    );
    INSERT INTO rag_fts(rag_fts) VALUES ('rebuild');
    CREATE TRIGGER rag_chunks_ai AFTER INSERT ON rag_chunks BEGIN
        INSERT INTO rag_fts(rowid, text, heading, ws_token)
        VALUES (new.id, new.text, new.heading, new.ws_token);
    END;
    CREATE TRIGGER rag_chunks_ad AFTER DELETE ON rag_chunks BEGIN
        INSERT INTO rag_fts(rag_fts, rowid, text, heading, ws_token)
        VALUES ('delete', old.id, old.text, old.heading, old.ws_token);
    END;
    """,
    # 3: text embedded with a chunk but never shown or keyword-indexed (DocumentInput.context)
    "ALTER TABLE rag_chunks ADD COLUMN context TEXT NOT NULL DEFAULT '';",
    # 4: every vector write logged, so an ANN graph (retrieval/ann.py) catches up from it
    ann.LOG_SCHEMA,
    # 5: a chunk's document and space from a small covering index: the ANN's ~100 results
    # and the keyword ranking's rows are mapped to their documents by id every search
    # (from the table itself each lookup read a page of chunk text: ~3x slower)
    "CREATE INDEX rag_chunks_owner ON rag_chunks(id, document_id, workspace_id);",
    # 6: the common keyword terms' counts, stored by bulk and background indexing so a
    # query does not count them (keyword_terms.py)
    STATS_SCHEMA,
]

_CODE_EXT = {
    ".py",
    ".js",
    ".ts",
    ".tsx",
    ".jsx",
    ".go",
    ".rs",
    ".java",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".hpp",
    ".rb",
    ".sh",
    ".kt",
    ".swift",
    ".cs",
    ".php",
    ".scala",
    ".sql",
    ".toml",
    ".yaml",
    ".yml",
    ".json",
}
_MARKDOWN_EXT = {".md", ".markdown", ".mdx", ".rst"}
_META_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


_known_tables: dict[tuple[int, str], Any] = {}  # (id(conn), table) -> conn: it exists


class IndexBackendMismatch(KairoxUserError):
    """The workspace was indexed with another embedding backend or dimension."""


@dataclass(frozen=True)
class DocumentInput:
    """One document to index: a file's text or any string (e.g. a conversation turn).

    ``context``: text that leads up to this one (a conversation's previous turn). Each
    chunk's vector is then the mean of its own embedding and that of context + chunk,
    so a short reply ("Yes, last May!") is found by what it answers, while the chunk's
    own text still dominates. Context is neither shown nor keyword-indexed.
    """

    doc_id: str
    text: str
    doc_type: str = "text"
    path: str = ""
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    origin: str = "text"  # "file" for files: those are removed when gone from disk
    mtime: float | None = None
    size: int | None = None
    context: str = ""


@dataclass(frozen=True)
class DocumentInfo:
    doc_id: str
    doc_type: str
    path: str
    origin: str
    content_hash: str
    chunks: int


def doc_type_for(path: Path) -> str:
    ext = path.suffix.lower()
    if ext in _MARKDOWN_EXT:
        return "markdown"
    if ext in _CODE_EXT:
        return "code"
    return "text"


def file_document(
    path: Path, st: os.stat_result, doc_id: str, metadata: Mapping[str, Any] | None
) -> DocumentInput:
    """A text file as a document (origin ``file``, its mtime and size kept so the next
    ``add_file`` of an unchanged file costs a stat): any index's ``add_file``."""
    return DocumentInput(
        doc_id,
        path.read_bytes().decode("utf-8", errors="replace"),
        doc_type_for(path),
        str(path),
        path.name,
        dict(metadata or {}),
        "file",
        st.st_mtime,
        st.st_size,
    )


def pack_vector(vector: Sequence[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


class WorkspaceRagIndex:
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
        config: Any,
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
        are never dropped, and the schema lookup scans sqlite_master: ~0.2 ms)."""
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
        lookup, ~10 us) runs only if the connection's lock is free at once, so the event
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
        texts: list[str] = []
        for text, heading, context in items:
            texts.append(self._embed_text(text, heading))
            if context:
                texts.append(f"{context}\n{text}")
        self.embed_calls += 1
        self.embedded_chunks += len(items)
        vectors = iter(self.backend.embed_documents(texts))
        out = []
        for _, _, context in items:
            own = list(next(vectors))
            out.append(pack_vector(mean_vector([own, next(vectors)]) if context else own))
        return out

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

    def _add_batch(self, batch: list[DocumentInput]) -> list[str]:
        """One transaction. A doc id given twice is applied in order (the last one is
        stored; statuses as if each were added in turn), and a row another process
        wrote since the plan was made is updated in place (an upsert, never a
        UNIQUE failure): the plan reads outside the write lock, the write re-reads."""
        last = {doc.doc_id: i for i, doc in enumerate(batch)}
        docs = [batch[i] for i in sorted(last.values())]
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
                meta = json.dumps(dict(doc.metadata), sort_keys=True, default=str)
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

    @staticmethod
    def _embed_text(text: str, heading: str) -> str:
        return f"{heading}\n{text}" if heading else text

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
        meta = json.dumps(dict(doc.metadata), sort_keys=True, default=str)
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
        meta = json.dumps(dict(doc.metadata), sort_keys=True, default=str)
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
        args: list[Any] = [self.workspace_id]
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
        self, query: str, n: int, where: str, args: list[Any], push: tuple[str, list[Any]] | None
    ) -> tuple[Ranked, Ranked]:
        return self._keyword(query, n, where, args), self._vector(query, n, where, args, push)

    def _collapse(
        self,
        fetch: Callable[[int], list[tuple[int, int, float]]],
        k: int,
        first: int | None = None,
    ) -> list[tuple[int, int, float]]:
        """Best chunk per document from a ranked chunk list, over-fetching as needed
        (``first``: the first fetch's size, ``2k + 4`` unless given)."""
        limit = first or k * 2 + 4
        while True:
            rows = fetch(limit)
            seen: dict[int, tuple[int, int, float]] = {}
            for cid, doc, score in rows:
                if doc not in seen:
                    seen[doc] = (cid, doc, score)
            if len(seen) >= k or len(rows) < limit or limit >= VEC_MAX_K:
                return list(seen.values())[:k]
            limit = min(limit * 4, VEC_MAX_K)

    def _keyword(
        self, query: str, k: int, where: str, args: list[Any]
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

        return self._collapse(fetch, k)

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
        self, query: str, k: int, where: str, args: list[Any], push: tuple[str, list[Any]] | None
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
            return self._collapse(
                lambda limit: [
                    (r[0], r[1], 1.0 - float(r[2])) for r in rows[:limit] if r[2] is not None
                ],
                k,
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
        return self._collapse(fetch, k, k + 8 if ready else None)

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
            r[0]: r
            for r in self.conn.execute(
                "SELECT c.id, c.text, c.heading, d.doc_id, d.doc_type, d.path, d.title, d.metadata "
                "FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id "
                f"WHERE c.id IN ({','.join('?' * len(ids))})",
                ids,
            )
        }
        hits = []
        for cid, _, score in ranked:
            row = rows[cid]
            metadata: dict[str, Any] = json.loads(row[7])
            metadata.update(
                {
                    "doc_type": row[4],
                    "path": row[5],
                    "title": row[6],
                    "heading": row[2],
                    "workspace_id": self.workspace_id,
                }
            )
            hits.append(
                RetrievalHit(
                    text=row[1],
                    score=float(score),
                    source=SOURCE,
                    doc_id=row[3],
                    metadata=metadata,
                    chunk_id=str(cid),
                )
            )
        return hits


def _filter_sql(filters: Mapping[str, Any]) -> tuple[str, list[Any], tuple[str, list[Any]] | None]:
    """SQL for ``filters`` over ``d`` (documents) and, when vec0 can apply them all, for it.

    ``path`` takes glob patterns; ``doc_type`` and ``doc_id`` exact values; any other
    key matches the document's metadata. A value may be a list of allowed values.
    """
    where: list[str] = []
    args: list[Any] = []
    vwhere: list[str] = []
    vargs: list[Any] = []
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


class WorkspaceIndexRetriever:
    """A space's index (any ``WorkspaceIndex``) as a ``WorkspaceRetriever``."""

    kind = "workspace"
    capabilities = RetrieverCapabilities()

    def __init__(self, index: WorkspaceIndex, *, name: str = SOURCE, mode: str = "hybrid") -> None:
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
