"""The core's retriever contract, run against a real botocore client behind a Stubber."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from bedrock_helpers import build, stubbed
from conftest import closed_port

from kairox_core.retrieval.base import WorkspaceRetriever
from kairox_core.testing.contracts import ContractDoc, RetrieverContract


class TestBedrockContract(RetrieverContract):
    # A Bedrock knowledge base is a vector search: it ranks every document for any query.
    empty_for_nonsense = False

    @pytest.fixture(autouse=True)
    def _setup(self, aws_env: None, silent_server: int, kairox_plugins: object) -> None:
        self.silent_port = silent_server

    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        retriever, _ = stubbed(docs)
        return retriever

    def make_unreachable_retriever(self, tmp_path: Path) -> WorkspaceRetriever:
        # a real HTTP attempt to a port nobody listens on
        return build(endpoint_url=f"http://127.0.0.1:{closed_port()}")

    def make_bad_credentials_retriever(self, tmp_path: Path) -> WorkspaceRetriever:
        retriever, stubber = stubbed(())
        stubber.add_client_error(
            "retrieve",
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
            403,
        )
        return retriever

    def make_slow_retriever(self, tmp_path: Path, timeout: float) -> WorkspaceRetriever:
        # a real socket that accepts the connection and never answers
        return build(timeout=timeout, endpoint_url=f"http://127.0.0.1:{self.silent_port}")
