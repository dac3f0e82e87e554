"""``PineconeRetriever``: one ``[knowledge_bases.<id>]`` of kind ``pinecone``.

It talks to the index's data plane with the SDK's ``AsyncIndex`` (httpx), so a call is
truly cancelled when the knowledge base's ``timeout`` runs out. The query vector comes
from a Kairox embedding backend (the core's ``hashing`` by default), or the index
embeds the text itself (``integrated_inference = true``, the records ``search`` API).
An ``AsyncIndex`` belongs to one event loop, so one is kept per running loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.retrieval.base import (
    EmbeddingBackend,
    RetrievalHit,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
)
from kairox_pinecone import errors, mapping
from kairox_pinecone.options import PineconeOptions

if TYPE_CHECKING:
    from kairox_core.config import KnowledgeBaseConfig

DEFAULT_NAMESPACE = "__default__"  # the records API's name for the default namespace
MAX_TOP_K = 10_000  # Pinecone's limit for top_k


class PineconeRetriever:
    """Queries one namespace of a Pinecone index."""

    capabilities = RetrieverCapabilities()

    def __init__(
        self,
        name: str,
        host: str,
        *,
        api_key: str,
        namespace: str = "",
        text_field: str = "text",
        doc_id_field: str | None = None,
        embedding_backend: str = "hashing",
        embedding_options: Mapping[str, Any] | None = None,
        integrated_inference: bool = False,
        filter: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        metric: str = "cosine",
        timeout: float = 10.0,
    ) -> None:
        if not api_key:
            raise RetrieverConfigError(
                name,
                (
                    'missing api_key: add `api_key = "$env:PINECONE_API_KEY"` under '
                    f"[knowledge_bases.{name}] (or export PINECONE_API_KEY)"
                ),
            )
        self.name = name
        self.host = host
        self.namespace = namespace
        self.text_field = text_field
        self.doc_id_field = doc_id_field
        self.embedding_backend = embedding_backend
        self.embedding_options = dict(embedding_options or {})
        self.integrated_inference = integrated_inference
        self.static_filter = dict(filter) if filter else None
        self.min_score = min_score
        self.metric = metric
        self.timeout = float(timeout)
        self._api_key = api_key
        self._embedder: EmbeddingBackend | None = None
        self._indexes: dict[asyncio.AbstractEventLoop, Any] = {}

    @classmethod
    def from_config(
        cls, kb: KnowledgeBaseConfig, options: PineconeOptions | None = None
    ) -> PineconeRetriever:
        """Build from a ``KnowledgeBaseConfig`` (``options`` as validated by the core);
        ``api_key`` is resolved from ``$env:`` here."""
        if options is None:
            from kairox_core.plugin_options import knowledge_base_key, validate_options

            options = validate_options(PineconeOptions, kb.options, key=knowledge_base_key(kb))
        secret = kb.secret("api_key") if options.api_key is not None else None
        api_key = secret.get_secret_value() if secret else os.environ.get("PINECONE_API_KEY", "")
        return cls(
            kb.id,
            options.host,
            api_key=api_key,
            namespace=options.namespace,
            text_field=options.text_field,
            doc_id_field=options.doc_id_field,
            embedding_backend=options.embedding_backend,
            embedding_options=options.embedding_options,
            integrated_inference=options.integrated_inference,
            filter=options.filter,
            min_score=options.min_score,
            metric=options.metric,
            timeout=kb.timeout,
        )

    # --- collaborators ------------------------------------------------------------

    def _index(self) -> Any:
        loop = asyncio.get_running_loop()
        index = self._indexes.get(loop)
        if index is None:
            from pinecone import AsyncIndex

            try:
                index = AsyncIndex(
                    host=self.host,
                    api_key=self._api_key,
                    timeout=self.timeout,
                    source_tag="kairox",
                )
            except Exception as exc:
                raise self._translate(exc) from exc
            self._indexes[loop] = index
        return index

    def embedder(self) -> EmbeddingBackend:
        """The embedding backend for query vectors, made on first use (it may load a model)."""
        if self._embedder is None:
            from kairox_core.errors import UnknownNameError
            from kairox_core.retrieval.embeddings import load_embedding_backend

            try:
                self._embedder = load_embedding_backend(
                    self.embedding_backend,
                    self.embedding_options,
                    options_key=f"knowledge_bases.{self.name}.embedding_options",
                )
            except UnknownNameError as exc:
                raise RetrieverConfigError(
                    self.name,
                    (
                        f"embedding backend '{self.embedding_backend}' is not available ({exc}); "
                        "set embedding_backend, or integrated_inference = true"
                    ),
                ) from None
            except Exception as exc:
                raise RetrieverConfigError(
                    self.name,
                    (
                        f"embedding backend '{self.embedding_backend}' cannot be made with "
                        f"embedding_options {self.embedding_options}: {exc}"
                    ),
                ) from exc
        return self._embedder

    def _translate(self, exc: BaseException) -> RetrieverError:
        return errors.translate(exc, source=self.name, host=self.host, namespace=self.namespace)

    # --- retrieval ----------------------------------------------------------------

    def build_filter(self, filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
        try:
            return mapping.build_filter(self.static_filter, filters)
        except mapping.FilterError as exc:
            raise RetrieverError(self.name, f"cannot apply filter: {exc}") from None

    async def _embed(self, query: str) -> list[float] | None:
        """The query vector (None with integrated inference); not counted in the timeout."""
        if self.integrated_inference:
            return None
        embedder = self.embedder()
        try:
            vector = await asyncio.to_thread(embedder.embed_query, query)
        except Exception as exc:
            raise RetrieverError(
                self.name, (f"embedding backend '{self.embedding_backend}' failed: {exc}")
            ) from exc
        return [float(x) for x in vector]

    async def _query(
        self, query: str, vector: list[float] | None, k: int, flt: dict[str, Any] | None
    ) -> list[mapping.Found]:
        index = self._index()
        if vector is None:
            response = await index.search(
                namespace=self.namespace or DEFAULT_NAMESPACE,
                top_k=k,
                inputs={"text": query},
                filter=flt,
            )
            return [
                mapping.Found(h.id, float(h.score), h.fields or {}) for h in response.result.hits
            ]
        response = await index.query(
            vector=vector,
            top_k=k,
            namespace=self.namespace,
            filter=flt,
            include_metadata=True,
        )
        return [mapping.Found(m.id, float(m.score), m.metadata or {}) for m in response.matches]

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        if k <= 0 or not query.strip():
            return []
        flt = self.build_filter(filters)
        vector = await self._embed(query)
        try:
            # chunks of one document collapse into one hit: ask for more to keep k documents
            top_k = min(k * 2 if self.doc_id_field else k, MAX_TOP_K)
            found = await asyncio.wait_for(
                self._query(query, vector, top_k, flt), timeout=self.timeout
            )
        except asyncio.TimeoutError:
            raise RetrieverTimeout(
                self.name,
                (
                    f"Pinecone index {self.host} did not answer within {self.timeout:g}s "
                    f"(raise `timeout` under [knowledge_bases.{self.name}])"
                ),
            ) from None
        except RetrieverError:
            raise
        except Exception as exc:
            raise self._translate(exc) from exc
        hits, missing = mapping.to_hits(
            found,
            source=self.name,
            text_field=self.text_field,
            doc_id_field=self.doc_id_field,
            k=k,
            min_score=self.min_score,
            metric=self.metric,
        )
        if found and not hits and missing == len(found):
            keys = sorted({key for f in found for key in f.fields})
            raise RetrieverConfigError(
                self.name,
                (
                    f"no match from Pinecone index {self.host} has the text field "
                    f"'{self.text_field}' (fields seen: {', '.join(keys) or 'none'}); "
                    "set text_field"
                ),
            )
        return hits

    async def close(self) -> None:
        indexes, self._indexes = self._indexes, {}
        loop = asyncio.get_running_loop()
        for index_loop, index in indexes.items():
            if index_loop is loop:
                await index.close()
