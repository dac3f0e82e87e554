"""Fixtures: a local Pinecone data plane on 127.0.0.1 and a test embedding backend."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from kairox_core.hookspecs import Register, hookimpl
from kairox_core.plugins import PluginHost
from kairox_pinecone.testing import FakePinecone, bag_of_words

pytest_plugins = ["kairox_core.testing.fixtures"]

API_KEY = "pc-kairox-test-key"
KEY_VAR = "KAIROX_TEST_PINECONE_KEY"
TEST_BACKEND = "kairox-test-bow"


class BagOfWordsBackend:
    """The same embedding the fake server uses for integrated inference."""

    name = TEST_BACKEND

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [bag_of_words(t, self.dimension) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return bag_of_words(text, self.dimension)


class _TestEmbeddingPlugin:
    @hookimpl
    def kairox_register_embedding_backends(self, register: Register) -> None:
        register(TEST_BACKEND, lambda **options: BagOfWordsBackend(**options))


@pytest.fixture
def test_backend(
    kairox_plugins: PluginHost, register_plugin: Callable[[object, str], PluginHost]
) -> str:
    """Registers ``kairox-test-bow`` through the embedding hook, like any plugin would."""
    register_plugin(_TestEmbeddingPlugin(), "kairox-test-embeddings")
    return TEST_BACKEND


@pytest.fixture
def api_key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_VAR, API_KEY)
    return f"$env:{KEY_VAR}"


@pytest.fixture
def pinecone_server() -> Iterator[FakePinecone]:
    server = FakePinecone(API_KEY)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def make_server() -> Iterator[Callable[..., FakePinecone]]:
    """Start more servers (slow ones, integrated-inference ones) for one test."""
    started: list[FakePinecone] = []

    def make(**kwargs: Any) -> FakePinecone:
        server = FakePinecone(API_KEY, **kwargs)
        server.start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
