"""Retrieval: the workspace index, knowledge bases, the composite retriever."""

from __future__ import annotations

from kairox_core.retrieval.base import (
    EmbeddingBackend,
    RetrievalHit,
    RetrieverAuthError,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
    RetrieverUnavailable,
    WorkspaceRetriever,
)

__all__ = [
    "EmbeddingBackend",
    "RetrievalHit",
    "RetrieverAuthError",
    "RetrieverConfigError",
    "RetrieverError",
    "RetrieverTimeout",
    "RetrieverUnavailable",
    "WorkspaceRetriever",
]
