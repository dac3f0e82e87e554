"""``KairoxRetriever``: a LlamaIndex retriever over Kairox search.

It asks the profile's composite retriever (the workspace index and the profile's
knowledge bases, queried together and fused by weighted RRF, reranked when the profile
names a reranker: what ``kairox search`` and every turn use) and returns each hit as a
``NodeWithScore`` whose metadata names its source and document.

A source that fails or times out degrades the search, as in a Kairox turn: its
failure is logged and kept in ``last_result``; when every source failed the search
raises (an empty answer would claim nothing matched). ``strict=True`` raises on any
failure.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from kairox_core import Kairox, KairoxConfig, KairoxError, Session, run_sync
from kairox_core.retrieval import CompositeResult, CompositeWorkspaceRetriever, RetrievalHit
from kairox_llamaindex.tokenizer import use_offline_tokenizer

log = logging.getLogger("kairox_llamaindex")


class SearchSource(Protocol):
    """What the retriever uses: a ``Kairox``, or a session's services (``for_session``)."""

    @property
    def config(self) -> KairoxConfig: ...

    def retriever_for(self, profile: str, workspace_id: str) -> CompositeWorkspaceRetriever: ...


class KairoxSearchError(KairoxError):
    """Kairox search failed: every source (or, with ``strict``, any source)."""


class KairoxRetriever(BaseRetriever):
    """Kairox search as a LlamaIndex ``BaseRetriever``.

    ``KairoxRetriever(kx, workspace="docs", profile="research", k=8)``, or
    ``KairoxRetriever.for_session(session)`` for a session's workspace and profile.
    ``filters`` maps metadata fields to a value or a list of allowed values.
    """

    def __init__(
        self,
        kairox: Kairox | SearchSource,
        *,
        workspace: str | None = None,
        profile: str | None = None,
        k: int | None = None,
        filters: Mapping[str, Any] | None = None,
        strict: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        use_offline_tokenizer()
        self.kairox = kairox
        self.workspace = workspace or kairox.config.kairox.default_workspace
        self.profile, _ = kairox.config.resolve_profile(profile)
        self.k = k if k is not None else kairox.config.retrieval.k
        if self.k < 1:
            raise ValueError(f"k must be at least 1, not {self.k}")
        self.filters = dict(filters) if filters else None
        self.strict = strict
        self.last_result: CompositeResult | None = None
        self._composite: CompositeWorkspaceRetriever | None = None

    @classmethod
    def for_session(cls, session: Session, **kwargs: Any) -> KairoxRetriever:
        """A retriever over what ``session``'s turns search (its workspace and profile)."""
        return cls(
            session.services, workspace=session.workspace_id, profile=session.profile, **kwargs
        )

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if not query_bundle.query_str.strip():
            return []
        if self._composite is None:
            self._composite = self.kairox.retriever_for(self.profile, self.workspace)
        result = await self._composite.search(query_bundle.query_str, self.k, self.filters)
        self.last_result = result
        self._check(result)
        return [to_node(hit) for hit in result.hits]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return run_sync(self._aretrieve(query_bundle))

    def _check(self, result: CompositeResult) -> None:
        failed = result.failed
        if not failed:
            return
        said = "; ".join(f"{s.name}: {s.error}" for s in failed)
        if self.strict or len(failed) == len(result.sources):
            raise KairoxSearchError(
                f"Kairox search in workspace '{self.workspace}' (profile '{self.profile}') "
                f"failed: {said}; `kairox search` shows the same report"
            )
        total = len(result.sources)
        log.warning("Kairox search: %d of %d sources failed: %s", len(failed), total, said)

    async def aclose(self) -> None:
        """Close the knowledge-base clients this retriever opened."""
        composite, self._composite = self._composite, None
        if composite is not None:
            await composite.close()

    def close(self) -> None:
        run_sync(self.aclose())


def to_node(hit: RetrievalHit) -> NodeWithScore:
    """A Kairox hit as a scored LlamaIndex node: source, document and score kept."""
    metadata = {**hit.metadata, "source": hit.source, "doc_id": hit.doc_id}
    node_id = hit.chunk_id or f"{hit.source}:{hit.doc_id}"
    node = TextNode(id_=node_id, text=hit.text, metadata=metadata)
    return NodeWithScore(node=node, score=hit.score)
