"""``WeaviateRetriever``: one ``[knowledge_bases.<id>]`` of kind ``weaviate``.

It uses weaviate-client's *async* client (``WeaviateAsyncClient``) rather than the sync
client in a thread: Kairox's ``retrieve`` is a coroutine, and a grpc.aio call is really
cancelled when the time budget runs out, whereas a timed-out sync call keeps a worker
thread busy until the server answers. The client is connected on first use and kept
for later queries; it belongs to the event loop that connected it, so a call from a
different loop reconnects.

``skip_init_checks=True`` because the client's own start-up checks also ask PyPI for
the latest client version on every connect; the checks that matter are done here: the
REST ``/v1/meta`` call (connect), a gRPC connectivity probe, and ``/v1/schema/<name>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import uuid
import warnings
from collections.abc import Mapping
from typing import Any

from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.config import KnowledgeBaseConfig, resolve_secret
from kairox_core.errors import KairoxUserError
from kairox_core.retrieval.base import (
    EmbeddingBackend,
    RetrievalHit,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
    RetrieverUnavailable,
)
from kairox_weaviate.errors import translate
from kairox_weaviate.options import WeaviateOptions


class WeaviateRetriever:
    """Hybrid (default), BM25 or near-vector search over one Weaviate collection."""

    capabilities = RetrieverCapabilities()

    def __init__(self, kb: KnowledgeBaseConfig, options: WeaviateOptions | None = None) -> None:
        self.name = kb.id or "weaviate"
        self.kb = kb
        if options is None:  # built directly, not through the registry: validate here
            from kairox_core.plugin_options import knowledge_base_key, validate_options

            options = validate_options(WeaviateOptions, kb.options, key=knowledge_base_key(kb))
        self.options = options
        self.timeout = kb.timeout
        self._client: Any = None
        self._collection: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._embedder: EmbeddingBackend | None = None

    # --- public --------------------------------------------------------------------

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        if k <= 0:
            return []
        where = self.options.http_url
        try:
            return await asyncio.wait_for(self._retrieve(query, k, filters), self.timeout)
        except RetrieverError as exc:
            if isinstance(exc, (RetrieverUnavailable, RetrieverTimeout)):
                await self._drop_client()
            raise
        except (asyncio.TimeoutError, TimeoutError):
            await self._drop_client()
            raise RetrieverTimeout(
                self.name,
                f"Weaviate at {where} did not answer within {self.timeout:g}s "
                f"(raise knowledge_bases.{self.name}.timeout if it is just slow)",
            ) from None
        except Exception as exc:
            error = translate(
                exc, source=self.name, where=where, collection=self.options.collection
            )
            if isinstance(error, (RetrieverUnavailable, RetrieverTimeout)):
                await self._drop_client()
            raise error from exc

    async def close(self) -> None:
        await self._drop_client()

    # --- connection ----------------------------------------------------------------

    async def _collection_handle(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            await self._drop_client()
            self._loop, self._lock = loop, asyncio.Lock()
        assert self._lock is not None
        async with self._lock:
            if self._collection is None:
                await self._connect()
        return self._collection

    async def _connect(self) -> None:
        # The first import of weaviate-client takes seconds; in a thread, it does not
        # stall the event loop, so the other knowledge bases of a turn keep their time.
        await asyncio.to_thread(_import_weaviate)
        import weaviate
        from weaviate.classes.init import AdditionalConfig, Auth, Timeout

        opts = self.options
        try:
            secret = self.kb.secret("api_key")
            headers = {
                key: resolved.get_secret_value()
                for key, value in opts.headers.items()
                if (
                    resolved := resolve_secret(
                        value, where=f"knowledge_bases.{self.name}.headers.{key}"
                    )
                )
                is not None
            }
        except KairoxUserError as exc:
            raise RetrieverConfigError(self.name, str(exc)) from None
        client = weaviate.use_async_with_custom(
            http_host=opts.http_host,
            http_port=opts.http_port,
            http_secure=opts.http_secure,
            grpc_host=opts.grpc_hostname,
            grpc_port=opts.grpc_port,
            grpc_secure=opts.grpc_tls,
            headers=headers or None,
            additional_config=AdditionalConfig(
                timeout=Timeout(init=self.timeout, query=self.timeout, insert=self.timeout)
            ),
            auth_credentials=Auth.api_key(secret.get_secret_value()) if secret else None,
            skip_init_checks=True,
        )
        self._client = client
        try:
            await client.connect()
            await self._probe_grpc()
            if not await client.collections.exists(opts.collection):
                raise RetrieverConfigError(
                    self.name,
                    f"collection '{opts.collection}' does not exist at "
                    f"{opts.http_url}; check knowledge_bases.{self.name}.collection",
                )
        except BaseException:  # incl. cancellation by the time budget: close, never leak
            await self._drop_client()
            raise
        use = getattr(client.collections, "use", None) or client.collections.get
        collection = use(opts.collection)
        if opts.tenant:
            collection = collection.with_tenant(opts.tenant)
        self._collection = collection

    async def _probe_grpc(self) -> None:
        """Fail fast when REST answers but the gRPC port does not.

        Without this the client retries UNAVAILABLE searches with exponential backoff
        (1 s, 2 s, 4 s...), which would surface as a timeout instead of the real cause.
        """
        import grpc

        opts = self.options
        channel = (
            grpc.aio.secure_channel(opts.grpc_target, grpc.ssl_channel_credentials())
            if opts.grpc_tls
            else grpc.aio.insecure_channel(opts.grpc_target)
        )
        try:
            state = channel.get_state(try_to_connect=True)
            while state is not grpc.ChannelConnectivity.READY:
                if state in (
                    grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                    grpc.ChannelConnectivity.SHUTDOWN,
                ):
                    raise RetrieverUnavailable(
                        self.name,
                        f"Weaviate answers at {opts.http_url} but its gRPC port "
                        f"{opts.grpc_target} does not; check grpc_port/grpc_host",
                    )
                await channel.wait_for_state_change(state)
                state = channel.get_state(try_to_connect=True)
        finally:
            await channel.close()

    async def _drop_client(self) -> None:
        client, self._client, self._collection = self._client, None, None
        if client is None:
            return
        # closing may fail for a client from a dead loop or a half-made connection
        with contextlib.suppress(Exception):
            await client.close()

    # --- search --------------------------------------------------------------------

    async def _retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None
    ) -> list[RetrievalHit]:
        _import_weaviate()
        where = self._filter(filters)
        if where is False:
            return []  # a filter with an empty list of allowed values matches nothing
        from weaviate.classes.query import HybridFusion, MetadataQuery

        opts = self.options
        collection = await self._collection_handle()
        wanted = None
        if opts.properties is not None:  # the text and id must come back whatever is listed
            wanted = list(
                dict.fromkeys(
                    [
                        *opts.properties,
                        opts.text_property,
                        *([opts.id_property] if opts.id_property else []),
                    ]
                )
            )
        common: dict[str, Any] = {"limit": k, "filters": where, "return_properties": wanted}
        if opts.mode == "bm25":
            result = await collection.query.bm25(
                query=query,
                query_properties=_list(opts.query_properties),
                return_metadata=MetadataQuery(score=True),
                **common,
            )
        elif opts.mode == "hybrid":
            extra: dict[str, Any] = {}
            if opts.max_vector_distance is not None:
                extra["max_vector_distance"] = opts.max_vector_distance
            fusion = HybridFusion.RANKED if opts.fusion == "ranked" else HybridFusion.RELATIVE_SCORE
            result = await collection.query.hybrid(
                query=query,
                alpha=opts.alpha,
                vector=await self._embed(query),
                fusion_type=fusion,
                target_vector=opts.target_vector,
                query_properties=_list(opts.query_properties),
                return_metadata=MetadataQuery(score=True),
                **extra,
                **common,
            )
        else:
            vector = await self._embed(query)
            assert vector is not None
            result = await collection.query.near_vector(
                near_vector=vector,
                distance=opts.max_vector_distance,
                target_vector=opts.target_vector,
                return_metadata=MetadataQuery(distance=True),
                **common,
            )
        hits = [hit for obj in result.objects if (hit := self._to_hit(obj)) is not None]
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits[:k]

    def _filter(self, filters: Mapping[str, Any] | None) -> Any:
        """Kairox filters -> a Weaviate filter; ``False`` when nothing can match."""
        if not filters:
            return None
        from weaviate.classes.query import Filter

        parts = []
        for key, value in filters.items():
            prop = Filter.by_property(key)
            if isinstance(value, (list, tuple, set, frozenset)):
                values = list(value)
                if not values:
                    return False
                parts.append(prop.contains_any(values))
            elif value is None:
                parts.append(prop.is_none(True))
            elif isinstance(value, (str, bool, int, float, datetime.datetime, uuid.UUID)):
                parts.append(prop.equal(value))
            else:
                raise RetrieverError(
                    self.name,
                    f"cannot filter on '{key}' with a {type(value).__name__}; use a "
                    f"string, number, boolean or a list of them",
                )
        return parts[0] if len(parts) == 1 else Filter.all_of(parts)

    async def _embed(self, query: str) -> list[float] | None:
        name = self.options.embedding
        if name is None:
            return None  # hybrid with the collection's own (server-side) vectoriser
        if self._embedder is None:
            from kairox_core.retrieval.embeddings import load_embedding_backend

            try:
                self._embedder = load_embedding_backend(
                    name,
                    self.options.embedding_options,
                    options_key=f"knowledge_bases.{self.name}.embedding_options",
                )
            except KairoxUserError as exc:
                raise RetrieverConfigError(self.name, str(exc)) from None
        embedder = self._embedder
        assert embedder is not None
        # model-backed embedders are CPU-heavy: keep them off the event loop
        vector = await asyncio.to_thread(embedder.embed_query, query)
        return [float(x) for x in vector]

    def _to_hit(self, obj: Any) -> RetrievalHit | None:
        opts = self.options
        properties = dict(obj.properties or {})
        text = properties.pop(opts.text_property, None)
        if text is None or text == "":
            return None  # nothing to put into a context window
        doc_id = str(obj.uuid)
        if opts.id_property and properties.get(opts.id_property) is not None:
            doc_id = str(properties[opts.id_property])
        meta = obj.metadata
        if opts.mode == "near_vector":
            distance = meta.distance if meta is not None else None
            score = 1.0 - float(distance) if distance is not None else 0.0
        else:
            score = float(meta.score) if meta is not None and meta.score is not None else 0.0
        metadata = {key: _plain(value) for key, value in properties.items()}
        return RetrievalHit(
            text=text if isinstance(text, str) else str(text),
            score=score,
            source=self.name,
            doc_id=doc_id,
            metadata=metadata,
            chunk_id=str(obj.uuid),
        )


def _import_weaviate() -> None:
    """Import weaviate-client, hiding authlib's httpx deprecation notice from CLI users.

    ``authlib.deprecate`` installs an "always" filter for its warnings when imported, so
    it is imported first and our "ignore" filter goes in front of it.
    """
    with warnings.catch_warnings():
        with contextlib.suppress(ImportError):
            import authlib.deprecate  # noqa: F401
        warnings.filterwarnings("ignore", message="The httpx module is deprecated")
        import weaviate  # noqa: F401


def _list(names: tuple[str, ...] | None) -> list[str] | None:
    return list(names) if names is not None else None


def _plain(value: Any) -> Any:
    """Property values as JSON-friendly Python (dates, UUIDs, geo points become text)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return str(value)
