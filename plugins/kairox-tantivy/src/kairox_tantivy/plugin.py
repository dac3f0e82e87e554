"""Registers the knowledge-base kind ``tantivy``. Tantivy itself is imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.hookspecs import RetrieverRegistrar, hookimpl
from kairox_tantivy.options import TantivyOptions

if TYPE_CHECKING:
    from kairox_core.config import KnowledgeBaseConfig
    from kairox_tantivy.retriever import TantivyRetriever


def make_tantivy_retriever(
    kb: KnowledgeBaseConfig, *, options: TantivyOptions | None = None
) -> TantivyRetriever:
    from kairox_tantivy.retriever import make_retriever

    return make_retriever(kb, options)


@hookimpl
def kairox_register_retrievers(register: RetrieverRegistrar) -> None:
    register("tantivy", make_tantivy_retriever, options=TantivyOptions)
