"""Retrieval: the workspace index, knowledge bases, the composite retriever.

The interfaces (``base``) import eagerly; the implementations load on first use so
a plugin importing ``RetrievalHit`` does not pull in SQLite or tiktoken.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.retrieval.base import (
    EmbeddingBackend,
    IndexableRetriever,
    IndexProgress,
    IndexReport,
    RetrievalHit,
    RetrieverAuthError,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
    RetrieverUnavailable,
    WorkspaceRetriever,
)
from kairox_core.retrieval.threads import run_blocking

if TYPE_CHECKING:
    from kairox_core.retrieval.composite import (
        CompositeResult,
        CompositeWorkspaceRetriever,
        RetrieverSource,
        SourceReport,
    )
    from kairox_core.retrieval.embeddings import HashingEmbedding, load_embedding_backend
    from kairox_core.retrieval.fusion import rrf_fuse
    from kairox_core.retrieval.index import (
        DocumentInput,
        IndexBackendMismatch,
        WorkspaceIndexRetriever,
        WorkspaceRagIndex,
    )
    from kairox_core.retrieval.rerank import Reranker, load_reranker, rerank
    from kairox_core.retrieval.selection import retriever_for_profile
    from kairox_core.retrieval.sqlite_fts import SqliteFtsRetriever

_LAZY = {
    "WorkspaceRagIndex": "kairox_core.retrieval.index",
    "DocumentInput": "kairox_core.retrieval.index",
    "IndexBackendMismatch": "kairox_core.retrieval.index",
    "WorkspaceIndexRetriever": "kairox_core.retrieval.index",
    "CompositeWorkspaceRetriever": "kairox_core.retrieval.composite",
    "CompositeResult": "kairox_core.retrieval.composite",
    "SourceReport": "kairox_core.retrieval.composite",
    "RetrieverSource": "kairox_core.retrieval.composite",
    "HashingEmbedding": "kairox_core.retrieval.embeddings",
    "load_embedding_backend": "kairox_core.retrieval.embeddings",
    "retriever_for_profile": "kairox_core.retrieval.selection",
    "Reranker": "kairox_core.retrieval.rerank",
    "rerank": "kairox_core.retrieval.rerank",
    "load_reranker": "kairox_core.retrieval.rerank",
    "SqliteFtsRetriever": "kairox_core.retrieval.sqlite_fts",
    "rrf_fuse": "kairox_core.retrieval.fusion",
}

__all__ = [
    "CompositeResult",
    "CompositeWorkspaceRetriever",
    "DocumentInput",
    "EmbeddingBackend",
    "HashingEmbedding",
    "IndexBackendMismatch",
    "IndexProgress",
    "IndexReport",
    "IndexableRetriever",
    "Reranker",
    "RetrievalHit",
    "RetrieverAuthError",
    "RetrieverCapabilities",
    "RetrieverConfigError",
    "RetrieverError",
    "RetrieverSource",
    "RetrieverTimeout",
    "RetrieverUnavailable",
    "SourceReport",
    "SqliteFtsRetriever",
    "WorkspaceIndexRetriever",
    "WorkspaceRagIndex",
    "WorkspaceRetriever",
    "load_embedding_backend",
    "load_reranker",
    "rerank",
    "retriever_for_profile",
    "rrf_fuse",
    "run_blocking",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kairox_core.retrieval' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)
