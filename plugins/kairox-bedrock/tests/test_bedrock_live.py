"""Against a real Bedrock knowledge base: runs only when its id and AWS credentials are set."""

from __future__ import annotations

import asyncio
import os

import pytest

from kairox_core.config import parse_config
from kairox_core.plugins import get_plugins

KB_ID = os.environ.get("KAIROX_BEDROCK_KB_ID")
HAS_CREDENTIALS = bool(
    os.environ.get("AWS_PROFILE")
    or (os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY"))
)

pytestmark = pytest.mark.skipif(
    not (KB_ID and HAS_CREDENTIALS),
    reason="live Bedrock test: set KAIROX_BEDROCK_KB_ID and AWS credentials (see README)",
)


def test_live_retrieve_returns_well_formed_hits(kairox_plugins: object) -> None:
    section = {"kind": "bedrock", "knowledge_base_id": KB_ID, "timeout": 30}
    region = os.environ.get("KAIROX_BEDROCK_REGION")
    if region:
        section["region"] = region
    kb = parse_config({"knowledge_bases": {"live": section}}).knowledge_bases["live"]
    retriever = get_plugins().get("retrievers", "bedrock").factory(kb)
    query = os.environ.get("KAIROX_BEDROCK_QUERY", "what is this about")

    async def go() -> list:
        try:
            return await retriever.retrieve(query, 3)
        finally:
            await retriever.close()

    hits = asyncio.run(go())
    assert len(hits) <= 3
    for hit in hits:
        assert hit.source == "live" and hit.text and hit.doc_id
