"""``KairoxRetriever``: a LangChain retriever over Kairox search.

It asks the same composite retriever a Kairox turn asks (``kx.retriever_for``): the
workspace index and the knowledge bases of the profile's source set, queried together
and fused (weighted RRF, then the configured reranker). Each hit becomes a
``Document`` whose metadata carries ``source`` (``workspace`` or the knowledge base),
``score`` (the fused score), ``doc_id`` and ``chunk_id``, and the hit's own metadata.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from kairox_core.retrieval import RetrieverError
from kairox_langchain._loop import aon_kairox_loop, on_kairox_loop

if TYPE_CHECKING:
    from kairox_core.retrieval import CompositeResult, CompositeWorkspaceRetriever, RetrievalHit


class KairoxRetriever(BaseRetriever):
    """``KairoxRetriever(kx=kx, workspace="docs", profile="default", k=4)``.

    ``workspace`` and ``profile`` default to the configuration's; ``k`` to
    ``[retrieval] k``; ``invoke(query, k=3)`` overrides it per call, and
    ``invoke(query, filters={...})`` passes metadata filters to every source. A source that
    fails is reported with a ``RuntimeWarning`` (and in ``last_result``); when every
    source fails the call raises ``RetrieverError``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kx: Any = Field(exclude=True)
    workspace: str | None = None
    profile: str | None = None
    k: int | None = Field(default=None, gt=0)
    last_result: Any = Field(default=None, exclude=True)
    _composite: CompositeWorkspaceRetriever | None = PrivateAttr(default=None)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return on_kairox_loop(self._search(query, kwargs.get("k"), kwargs.get("filters")))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return await aon_kairox_loop(self._search(query, kwargs.get("k"), kwargs.get("filters")))

    async def _search(self, query: str, k: Any, filters: Any) -> list[Document]:
        if k is None:
            k = self.k if self.k is not None else self.kx.config.retrieval.k
        if not isinstance(k, int) or isinstance(k, bool) or k <= 0:
            raise ValueError(f"k must be a positive integer, not {k!r}")
        if self._composite is None:
            cfg = self.kx.config
            profile, _ = cfg.resolve_profile(self.profile)
            workspace = self.workspace or cfg.kairox.default_workspace
            self._composite = self.kx.retriever_for(profile, workspace)
        result: CompositeResult = await self._composite.search(query, k, filters)
        self.last_result = result
        failed = [s for s in result.sources if not s.ok]
        if failed and len(failed) == len(result.sources):
            reasons = "; ".join(f"{s.name}: {s.error}" for s in failed)
            raise RetrieverError("composite", f"every retrieval source failed ({reasons})")
        for src in failed:
            warnings.warn(
                f"Kairox retrieval source {src.name} failed: {src.error}",
                RuntimeWarning,
                stacklevel=2,
            )
        return [_document(hit) for hit in result.hits[:k]]

    def close(self) -> None:
        """Release the sources' clients (they are rebuilt on the next call)."""
        composite, self._composite = self._composite, None
        if composite is not None:
            on_kairox_loop(composite.close())


def _document(hit: RetrievalHit) -> Document:
    metadata: dict[str, Any] = dict(hit.metadata)
    metadata.update(source=hit.source, score=hit.score, doc_id=hit.doc_id, chunk_id=hit.chunk_id)
    return Document(page_content=hit.text, metadata=metadata)
