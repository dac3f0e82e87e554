"""Fixtures: a fake Weaviate (REST + gRPC on 127.0.0.1) and a tiny embedding backend."""

from __future__ import annotations

import hashlib
import math
import re
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from kairox_core.config import KnowledgeBaseConfig
from kairox_core.hookspecs import Register, hookimpl
from kairox_core.plugins import get_plugins, reset_plugins
from kairox_weaviate.testing import FakeWeaviate

pytest_plugins = ["kairox_core.testing.fixtures"]

API_KEY = "kx-test-secret"
KEY_ENV = "KX_TEST_WEAVIATE_KEY"
WORDS_BACKEND = "kx-test-words"


class WordHashEmbedder:
    """Deterministic bag-of-words feature hashing (sha1, 512 dims, L2-normalised).

    Stands in for an embedding model on both sides: the fake's server-side vectoriser
    and the Kairox embedding backend that makes query vectors, so the vector half of
    hybrid search behaves like a real (if simple-minded) model.
    """

    name = WORDS_BACKEND

    def __init__(self, dimension: int = 512) -> None:
        self.dimension = dimension

    def _one(self, text: str) -> list[float]:
        vec = [0.0] * self.dimension
        for token in re.findall(r"[0-9a-z]+", text.lower()):
            digest = hashlib.sha1(token.encode()).digest()
            vec[int.from_bytes(digest[:4], "big") % self.dimension] += 1.0
        norm = math.sqrt(sum(x * x for x in vec))
        return [x / norm for x in vec] if norm else vec

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


class _WordsPlugin:
    @hookimpl
    def kairox_register_embedding_backends(self, register: Register) -> None:
        register(WORDS_BACKEND, lambda **options: WordHashEmbedder(**options))


@pytest.fixture
def words_backend() -> Iterator[WordHashEmbedder]:
    """Registers ``kx-test-words`` as a Kairox embedding backend for one test."""
    reset_plugins()
    host = get_plugins()
    host.add(_WordsPlugin(), "kx-test-words")
    yield WordHashEmbedder()
    reset_plugins()


@pytest.fixture(scope="session")
def fake_weaviate() -> Iterator[FakeWeaviate]:
    """One fake Weaviate for the session, requiring ``API_KEY``; tests add collections."""
    server = FakeWeaviate(api_key=API_KEY).start()
    yield server
    server.stop()


@pytest.fixture
def start_fake() -> Iterator[Callable[..., FakeWeaviate]]:
    """Start a dedicated fake (slow, differently configured...) stopped after the test."""
    started: list[FakeWeaviate] = []

    def start(**kwargs: Any) -> FakeWeaviate:
        server = FakeWeaviate(**kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(autouse=True)
def _api_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def kb_config(kb_id: str = "wv", **options: Any) -> KnowledgeBaseConfig:
    """A ``[knowledge_bases.<kb_id>]`` section as kairox.toml would give it."""
    return KnowledgeBaseConfig.model_validate({"id": kb_id, "kind": "weaviate", **options})
