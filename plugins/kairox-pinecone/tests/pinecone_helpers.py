"""Build Pinecone retrievers the way Kairox does, and seed the fake index with the real SDK."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conftest import API_KEY, BagOfWordsBackend

from kairox_core.config import KnowledgeBaseConfig, parse_config
from kairox_core.plugins import get_plugins
from kairox_core.retrieval.selection import build_knowledge_base
from kairox_core.testing.contracts import ContractDoc
from kairox_pinecone.retriever import PineconeRetriever

KB_NAME = "vectors"


def kb_config(
    host: str, kb_name: str = KB_NAME, timeout: float = 10.0, **options: Any
) -> KnowledgeBaseConfig:
    section = {"kind": "pinecone", "timeout": timeout, "host": host, **options}
    config = parse_config({"knowledge_bases": {kb_name: section}}, source="test.toml")
    return config.knowledge_bases[kb_name]


def build(host: str, **options: Any) -> PineconeRetriever:
    """A retriever made by the registered ``pinecone`` factory (the installed entry point),
    its options validated by the core as for a kairox.toml."""
    assert get_plugins().get("retrievers", "pinecone").options is not None
    retriever = build_knowledge_base(kb_config(host, **options))
    assert isinstance(retriever, PineconeRetriever)
    return retriever


def doc_metadata(doc: ContractDoc, text_field: str = "text") -> dict[str, Any]:
    return {text_field: doc.text, "title": doc.title, **doc.metadata}


def seed_vectors(
    host: str, namespace: str, docs: Sequence[ContractDoc], text_field: str = "text"
) -> None:
    """Upsert the docs with the real (sync) SDK client: POST /vectors/upsert."""
    if not docs:
        return
    from pinecone import Pinecone

    backend = BagOfWordsBackend()
    index = Pinecone(api_key=API_KEY).Index(host=host)
    try:
        response = index.upsert(
            vectors=[
                {
                    "id": d.id,
                    "values": backend.embed_query(d.title + " " + d.text),
                    "metadata": doc_metadata(d, text_field),
                }
                for d in docs
            ],
            namespace=namespace,
        )
        assert response.upserted_count == len(docs)
    finally:
        index.close()


def seed_records(host: str, namespace: str, docs: Sequence[ContractDoc]) -> None:
    """Upsert text records for integrated inference: POST /records/namespaces/{ns}/upsert."""
    from pinecone import Pinecone

    index = Pinecone(api_key=API_KEY).Index(host=host)
    try:
        records = [{"_id": d.id, **doc_metadata(d)} for d in docs]
        index.upsert_records(namespace=namespace, records=records)
    finally:
        index.close()
