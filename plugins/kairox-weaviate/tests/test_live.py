"""Against a real Weaviate: skipped unless ``KAIROX_WEAVIATE_URL`` is set.

``KAIROX_WEAVIATE_URL``        http(s)://host[:port] of the REST API
``KAIROX_WEAVIATE_GRPC_PORT``  gRPC port (default 50051)
``KAIROX_WEAVIATE_API_KEY``    API key, if the instance needs one
``KAIROX_WEAVIATE_COLLECTION`` an existing collection with a ``text`` property; without
                               it the test only checks that a missing collection is
                               reported as such
``KAIROX_WEAVIATE_QUERY``      query to run (default "the")
``KAIROX_WEAVIATE_MODES``      comma list of modes to try (default "bm25"; add "hybrid"
                               when the collection has a vectoriser)
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from conftest import kb_config

from kairox_core.retrieval.base import RetrievalHit, RetrieverConfigError
from kairox_weaviate.plugin import make_retriever

URL = os.environ.get("KAIROX_WEAVIATE_URL")
pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not URL, reason="KAIROX_WEAVIATE_URL is not set"),
]


def _options(collection: str, **extra: Any) -> dict[str, Any]:
    options: dict[str, Any] = {"url": URL, "collection": collection, **extra}
    if os.environ.get("KAIROX_WEAVIATE_GRPC_PORT"):
        options["grpc_port"] = int(os.environ["KAIROX_WEAVIATE_GRPC_PORT"])
    if os.environ.get("KAIROX_WEAVIATE_API_KEY"):
        options["api_key"] = "$env:KAIROX_WEAVIATE_API_KEY"
    return options


def _search(options: dict[str, Any], query: str, k: int) -> list[RetrievalHit]:
    retriever = make_retriever(kb_config("live", timeout=30, **options))

    async def go() -> list[RetrievalHit]:
        try:
            return await retriever.retrieve(query, k)
        finally:
            await retriever.close()

    return asyncio.run(go())


def test_missing_collection_is_reported() -> None:
    with pytest.raises(RetrieverConfigError, match="does not exist"):
        _search(_options("KairoxNoSuchCollection"), "anything", 1)


@pytest.mark.skipif(
    not os.environ.get("KAIROX_WEAVIATE_COLLECTION"), reason="KAIROX_WEAVIATE_COLLECTION is not set"
)
@pytest.mark.parametrize(
    "mode", os.environ.get("KAIROX_WEAVIATE_MODES", "bm25").replace(" ", "").split(",")
)
def test_search_real_collection(mode: str) -> None:
    query = os.environ.get("KAIROX_WEAVIATE_QUERY", "the")
    hits = _search(_options(os.environ["KAIROX_WEAVIATE_COLLECTION"], mode=mode), query, 3)
    assert len(hits) <= 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.source == "live" and h.text for h in hits)
