"""Build Bedrock retrievers the way Kairox does: kairox.toml data -> config -> plugin factory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kairox_bedrock.retriever import BedrockRetriever
from kairox_bedrock.testing import KnowledgeBaseStubber, SimulatedKnowledgeBase
from kairox_core.config import KnowledgeBaseConfig, parse_config
from kairox_core.plugins import get_plugins
from kairox_core.retrieval.selection import build_knowledge_base
from kairox_core.testing.contracts import ContractDoc

KB_NAME = "aws_docs"
BEDROCK_KB_ID = "KAIROXKB01"
REGION = "eu-west-1"


def kb_config(kb_name: str = KB_NAME, timeout: float = 10.0, **options: Any) -> KnowledgeBaseConfig:
    section = {
        "kind": "bedrock",
        "timeout": timeout,
        "knowledge_base_id": BEDROCK_KB_ID,
        "region": REGION,
        **options,
    }
    config = parse_config({"knowledge_bases": {kb_name: section}}, source="test.toml")
    return config.knowledge_bases[kb_name]


def build(kb_name: str = KB_NAME, timeout: float = 10.0, **options: Any) -> BedrockRetriever:
    """A retriever made by the registered ``bedrock`` factory (the installed entry point),
    its options validated by the core as for a kairox.toml."""
    assert get_plugins().get("retrievers", "bedrock").options is not None
    retriever = build_knowledge_base(kb_config(kb_name, timeout, **options))
    assert isinstance(retriever, BedrockRetriever)
    return retriever


def stubbed(
    docs: Sequence[ContractDoc], **options: Any
) -> tuple[BedrockRetriever, KnowledgeBaseStubber]:
    """A retriever whose real botocore client is answered by a simulated knowledge base."""
    retriever = build(**options)
    stubber = KnowledgeBaseStubber(retriever.client, SimulatedKnowledgeBase(docs, BEDROCK_KB_ID))
    stubber.activate()
    return retriever, stubber
