"""What a storage backend's own retrieval index is built from (public: the backend API).

A backend that brings its own ``WorkspaceIndex`` (the PostgreSQL plugin does) ranks,
fuses, chunks, embeds and reports hits the way the built-in SQLite index does; these
are the shared pieces, gathered here so a backend imports one public module instead of
the retrieval package's internals (which may move: see docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

from kairox_core.retrieval.base import EmbeddingBackend, RetrievalHit
from kairox_core.retrieval.chunking import Chunk, Chunker
from kairox_core.retrieval.embeddings import load_embedding_backend
from kairox_core.retrieval.fts import query_terms
from kairox_core.retrieval.fts5_terms import (
    BM25_B,
    BM25_K1,
    IDF_FLOOR,
    Fts5Terms,
    TermCounts,
    query_weights,
    select_terms,
)
from kairox_core.retrieval.index import (
    COMPONENT,
    MIGRATIONS,
    MODES,
    DocumentInfo,
    DocumentInput,
    IndexBackendMismatch,
    WorkspaceIndexRetriever,
    file_document,
    pack_vector,
)
from kairox_core.retrieval.index_common import (
    SOURCE,
    Ranked,
    batches,
    build_hits,
    chunk_vectors,
    collapse,
    doc_hash,
    embed_texts,
    filter_values,
    fuse_rankings,
    last_per_doc_id,
    metadata_json,
    statuses,
    with_context,
)
from kairox_core.retrieval.keyword_terms import CHEAP_ROWS, MAX_TERMS, weightless_floor
from kairox_core.store.migrations import migrate


def migrate_sqlite_index(conn: Any) -> int:
    """Bring the built-in SQLite index's tables up to date on ``conn`` (a copy into a
    SQLite file creates them before its transaction); the version now in force."""
    return migrate(conn, COMPONENT, MIGRATIONS)


__all__ = [
    "BM25_B",
    "BM25_K1",
    "CHEAP_ROWS",
    "IDF_FLOOR",
    "MAX_TERMS",
    "MODES",
    "SOURCE",
    "Chunk",
    "Chunker",
    "DocumentInfo",
    "DocumentInput",
    "EmbeddingBackend",
    "Fts5Terms",
    "IndexBackendMismatch",
    "Ranked",
    "RetrievalHit",
    "TermCounts",
    "WorkspaceIndexRetriever",
    "batches",
    "build_hits",
    "chunk_vectors",
    "collapse",
    "doc_hash",
    "embed_texts",
    "file_document",
    "filter_values",
    "fuse_rankings",
    "last_per_doc_id",
    "load_embedding_backend",
    "metadata_json",
    "migrate_sqlite_index",
    "pack_vector",
    "query_terms",
    "query_weights",
    "select_terms",
    "statuses",
    "weightless_floor",
    "with_context",
]
