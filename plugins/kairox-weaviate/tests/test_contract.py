"""The core's retriever contract, run against the real weaviate-client and the fake server,
once per query mode (hybrid with a server-side vectoriser, hybrid with a Kairox query
vector, BM25, near_vector)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import KEY_ENV, WORDS_BACKEND, WordHashEmbedder, closed_port, kb_config

from kairox_core.retrieval.base import WorkspaceRetriever
from kairox_core.testing.contracts import ContractDoc, RetrieverContract
from kairox_weaviate.plugin import make_retriever
from kairox_weaviate.testing import FakeObject, FakeWeaviate


def load(
    server: FakeWeaviate,
    docs: Sequence[ContractDoc],
    embedder: WordHashEmbedder,
    *,
    vectorizer: bool = True,
) -> str:
    """A fresh collection holding ``docs`` (vectors over title + text); returns its name."""
    name = f"Kx{uuid.uuid4().hex[:12]}"
    objects = [
        FakeObject(
            properties={"doc_id": d.id, "title": d.title, "text": d.text, **d.metadata},
            vectors={"default": embedder.embed_query(f"{d.title} {d.text}")},
        )
        for d in docs
    ]
    server.add_collection(name, objects, vectorizer=embedder.embed_query if vectorizer else None)
    return name


class _WeaviateContract(RetrieverContract):
    options: ClassVar[dict[str, Any]] = {}

    @pytest.fixture(autouse=True)
    def _wire(
        self,
        fake_weaviate: FakeWeaviate,
        words_backend: WordHashEmbedder,
        start_fake: Callable[..., FakeWeaviate],
    ) -> None:
        self.server = fake_weaviate
        self.embedder = words_backend
        self.start_fake = start_fake

    def _options(self, server: FakeWeaviate, collection: str, **extra: Any) -> dict[str, Any]:
        return {
            "url": server.url,
            "grpc_port": server.grpc_port,
            "collection": collection,
            "api_key": f"$env:{KEY_ENV}",
            "id_property": "doc_id",
            **self.options,
            **extra,
        }

    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        name = load(self.server, docs, self.embedder)
        return make_retriever(kb_config("wv-contract", **self._options(self.server, name)))

    def make_unreachable_retriever(self, tmp_path: Path) -> WorkspaceRetriever:
        return make_retriever(
            kb_config(
                "wv-gone",
                **{
                    **self._options(self.server, "Docs"),
                    "url": f"http://127.0.0.1:{closed_port()}",
                    "grpc_port": closed_port(),
                },
            )
        )

    def make_bad_credentials_retriever(self, tmp_path: Path) -> WorkspaceRetriever:
        name = load(self.server, (), self.embedder)
        return make_retriever(
            kb_config("wv-badkey", **self._options(self.server, name, api_key="not-the-key"))
        )

    def make_slow_retriever(self, tmp_path: Path, timeout: float) -> WorkspaceRetriever:
        slow = self.start_fake(api_key=None, search_delay=timeout * 4)
        name = load(slow, (), self.embedder)
        return make_retriever(
            kb_config("wv-slow", timeout=timeout, **{**self._options(slow, name), "api_key": None})
        )


class TestHybridServerVectorizer(_WeaviateContract):
    """Default mode: hybrid, the collection's vectoriser embeds the query."""

    options: ClassVar[dict[str, Any]] = {"max_vector_distance": 0.9}


class TestHybridKairoxVector(_WeaviateContract):
    """Hybrid with the query vector made by a Kairox embedding backend."""

    options: ClassVar[dict[str, Any]] = {
        "embedding": WORDS_BACKEND,
        "alpha": 0.5,
        "max_vector_distance": 0.9,
    }


class TestBM25(_WeaviateContract):
    options: ClassVar[dict[str, Any]] = {"mode": "bm25"}


class TestNearVector(_WeaviateContract):
    options: ClassVar[dict[str, Any]] = {"mode": "near_vector", "embedding": WORDS_BACKEND}
    empty_for_nonsense = False  # pure vector search ranks every object
