"""The core's retriever contract, run with the real pinecone SDK against a local index."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from conftest import closed_port
from pinecone_helpers import build, seed_records, seed_vectors

from kairox_core.retrieval.base import WorkspaceRetriever
from kairox_core.testing.contracts import ContractDoc, RetrieverContract
from kairox_pinecone.testing import FakePinecone

_namespaces = itertools.count()


class TestPineconeContract(RetrieverContract):
    """Query vectors from a Kairox embedding backend; the index returns top-k by cosine."""

    # Vector search ranks every stored vector for any query.
    empty_for_nonsense = False

    @pytest.fixture(autouse=True)
    def _setup(
        self,
        pinecone_server: FakePinecone,
        make_server: Callable[..., FakePinecone],
        test_backend: str,
        api_key_env: str,
    ) -> None:
        self.server = pinecone_server
        self.make_server = make_server
        self.backend = test_backend
        self.api_key = api_key_env

    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        namespace = f"contract-{next(_namespaces)}"
        seed_vectors(self.server.url, namespace, docs)
        return build(
            self.server.url,
            namespace=namespace,
            api_key=self.api_key,
            embedding_backend=self.backend,
        )

    def make_unreachable_retriever(self, tmp_path: Path) -> WorkspaceRetriever:
        return build(
            f"http://127.0.0.1:{closed_port()}",
            api_key=self.api_key,
            embedding_backend=self.backend,
        )

    def make_bad_credentials_retriever(self, tmp_path: Path) -> WorkspaceRetriever:
        return build(self.server.url, api_key="pc-wrong-key", embedding_backend=self.backend)

    def make_slow_retriever(self, tmp_path: Path, timeout: float) -> WorkspaceRetriever:
        slow = self.make_server(delay=timeout * 6)
        return build(
            slow.url, api_key=self.api_key, embedding_backend=self.backend, timeout=timeout
        )


class TestPineconeIntegratedInferenceContract(TestPineconeContract):
    """The index embeds the query itself: the records ``search`` API."""

    @pytest.fixture(autouse=True)
    def _setup(
        self, make_server: Callable[..., FakePinecone], test_backend: str, api_key_env: str
    ) -> None:
        from kairox_pinecone.testing import bag_of_words

        self.server = make_server(embed=lambda text: bag_of_words(text))
        self.make_server = make_server
        self.backend = test_backend
        self.api_key = api_key_env

    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        namespace = f"records-{next(_namespaces)}"
        if docs:
            seed_records(self.server.url, namespace, docs)
        return build(
            self.server.url, namespace=namespace, api_key=self.api_key, integrated_inference=True
        )

    def make_unreachable_retriever(self, tmp_path: Path) -> WorkspaceRetriever:
        return build(
            f"http://127.0.0.1:{closed_port()}", api_key=self.api_key, integrated_inference=True
        )

    def make_bad_credentials_retriever(self, tmp_path: Path) -> WorkspaceRetriever:
        return build(self.server.url, api_key="pc-wrong-key", integrated_inference=True)

    def make_slow_retriever(self, tmp_path: Path, timeout: float) -> WorkspaceRetriever:
        slow = self.make_server(delay=timeout * 6, embed=lambda text: [1.0])
        return build(slow.url, api_key=self.api_key, integrated_inference=True, timeout=timeout)
