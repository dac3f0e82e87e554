"""Registers the ``pinecone`` knowledge-base kind. The SDK is imported only when it is used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.hookspecs import RetrieverRegistrar, hookimpl
from kairox_pinecone.options import PineconeOptions

if TYPE_CHECKING:
    from kairox_core.config import KnowledgeBaseConfig
    from kairox_pinecone.retriever import PineconeRetriever


def _factory(
    kb: KnowledgeBaseConfig, *, options: PineconeOptions | None = None
) -> PineconeRetriever:
    from kairox_pinecone.retriever import PineconeRetriever

    return PineconeRetriever.from_config(kb, options)


@hookimpl
def kairox_register_retrievers(register: RetrieverRegistrar) -> None:
    register("pinecone", _factory, options=PineconeOptions)
