"""Which sources a turn queries: the profile's knowledge bases plus the workspace index."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from kairox_core.capabilities import verify
from kairox_core.retrieval.base import EmbeddingBackend, WorkspaceRetriever
from kairox_core.retrieval.composite import CompositeWorkspaceRetriever, RetrieverSource
from kairox_core.retrieval.isolation import IsolatedRetriever, is_third_party

if TYPE_CHECKING:
    from collections.abc import Callable

    from kairox_core.config import KairoxConfig, KnowledgeBaseConfig
    from kairox_core.hookspecs import RetrieverWithOptions


def build_knowledge_base(kb: KnowledgeBaseConfig) -> WorkspaceRetriever:
    """The retriever for one ``[knowledge_bases.<id>]``; an unknown kind names its plugin,
    and keys its options model rejects are a ``ConfigError``."""
    from kairox_core.plugin_options import knowledge_base_key, validate_options
    from kairox_core.plugins import RETRIEVERS, get_plugins

    reg = get_plugins().get(RETRIEVERS, kb.kind, context=f"knowledge_bases.{kb.id}.kind")
    retriever: WorkspaceRetriever
    if reg.options is None:  # registered without a model: factory(kb)
        retriever = cast("Callable[[KnowledgeBaseConfig], WorkspaceRetriever]", reg.factory)(kb)
    else:
        options = validate_options(reg.options, kb.options, key=knowledge_base_key(kb))
        retriever = cast("RetrieverWithOptions", reg.factory)(kb, options=options)
    return verify(retriever, f"knowledge-base kind '{kb.kind}'")


def retriever_for_profile(
    config: KairoxConfig,
    profile: str | None,
    database_path: str | os.PathLike[str] | Any,
    *,
    workspace_id: str = "default",
    backend: EmbeddingBackend | None = None,
) -> CompositeWorkspaceRetriever:
    """The composite a turn under ``profile`` (a name or alias) queries.

    Only knowledge bases whose ``profiles`` list the profile or one of its aliases
    (or list none) are included, plus the workspace index unless
    ``[retrieval] workspace_index = false``; a third-party knowledge base runs on a
    loop of its own (isolation.py), so it cannot hold the turn; the profile's ``reranker`` (if any)
    reorders the fused top ``rerank_top_n``. ``database_path`` may also be an open
    connection, or a ``Storage`` (its own retrieval index is used).
    """
    from kairox_core.retrieval.index import WorkspaceRagIndex
    from kairox_core.retrieval.rerank import reranker_for_profile
    from kairox_core.store.protocol import Storage, WorkspaceIndex

    r = config.retrieval
    name = profile or config.kairox.default_profile
    reranker, top_n = reranker_for_profile(config, name)
    sources: list[RetrieverSource] = []
    index: WorkspaceIndex | None = None
    try:
        if r.workspace_index:
            index = (
                verify(
                    database_path.workspace_index(config, workspace_id, backend=backend),
                    f"the {database_path.name} storage's workspace index",
                )
                if isinstance(database_path, Storage)
                else WorkspaceRagIndex.from_config(
                    config, database_path, workspace_id, backend=backend
                )
            )
            sources.append(
                RetrieverSource(
                    index.as_retriever(mode=r.search_mode),
                    "workspace",
                    r.workspace_weight,
                    r.timeout,
                )
            )
        for kb in config.knowledge_bases_for(name):
            timeout = kb.timeout if "timeout" in kb.model_fields_set else r.timeout
            kb = kb.model_copy(update={"timeout": timeout})  # the factory sees the one in force
            retriever = build_knowledge_base(kb)
            if is_third_party(retriever):  # its blocking or hanging cannot hold the turn
                retriever = IsolatedRetriever(retriever)
            sources.append(RetrieverSource(retriever, "knowledge_base", kb.weight, timeout))
    except BaseException:
        if index is not None:  # do not leak an opened index when a later source fails
            index.close()
        raise
    return CompositeWorkspaceRetriever(
        sources, rrf_k=r.rrf_k, reranker=reranker, rerank_top_n=top_n
    )
