"""Against a real Pinecone index: runs only when its API key and host are in the environment."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from kairox_core.config import parse_config
from kairox_core.plugins import get_plugins

HOST = os.environ.get("KAIROX_PINECONE_HOST")
pytestmark = pytest.mark.skipif(
    not (HOST and os.environ.get("PINECONE_API_KEY")),
    reason="live Pinecone test: set PINECONE_API_KEY and KAIROX_PINECONE_HOST (see README)",
)


def test_live_query_returns_well_formed_hits(kairox_plugins: object) -> None:
    section: dict[str, Any] = {
        "kind": "pinecone",
        "host": HOST,
        "api_key": "$env:PINECONE_API_KEY",
        "timeout": 30,
        "namespace": os.environ.get("KAIROX_PINECONE_NAMESPACE", ""),
        "text_field": os.environ.get("KAIROX_PINECONE_TEXT_FIELD", "text"),
    }
    if os.environ.get("KAIROX_PINECONE_INTEGRATED") == "1":
        section["integrated_inference"] = True
    else:
        section["embedding_backend"] = os.environ.get("KAIROX_PINECONE_BACKEND", "hashing")
    kb = parse_config({"knowledge_bases": {"live": section}}).knowledge_bases["live"]
    retriever = get_plugins().get("retrievers", "pinecone").factory(kb)

    async def go() -> list[Any]:
        try:
            return list(
                await retriever.retrieve(
                    os.environ.get("KAIROX_PINECONE_QUERY", "what is this about"), 3
                )
            )
        finally:
            await retriever.close()

    hits = asyncio.run(go())
    assert len(hits) <= 3
    for hit in hits:
        assert hit.source == "live" and hit.text and hit.doc_id
