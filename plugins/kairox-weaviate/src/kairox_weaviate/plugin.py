"""Registers the knowledge-base kind ``weaviate``. Thin: weaviate-client (and grpc) are
imported only when a ``weaviate`` knowledge base is actually built and queried."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.hookspecs import RetrieverRegistrar, hookimpl
from kairox_weaviate.options import WeaviateOptions

if TYPE_CHECKING:
    from kairox_core.config import KnowledgeBaseConfig
    from kairox_weaviate.retriever import WeaviateRetriever

KIND = "weaviate"


def make_retriever(
    kb: KnowledgeBaseConfig, *, options: WeaviateOptions | None = None
) -> WeaviateRetriever:
    """Factory for one ``[knowledge_bases.<id>]`` with ``kind = "weaviate"`` (``options``
    validated by the core; validated here when called directly)."""
    from kairox_weaviate.retriever import WeaviateRetriever

    return WeaviateRetriever(kb, options)


@hookimpl
def kairox_register_retrievers(register: RetrieverRegistrar) -> None:
    register(KIND, make_retriever, options=WeaviateOptions)
