"""The built-in ``hashing`` embedding backend and the registry loader."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kairox_core.errors import KairoxUserError, UnknownNameError
from kairox_core.retrieval.base import EmbeddingBackend
from kairox_core.retrieval.embeddings import HashingEmbedding, load_embedding_backend
from kairox_core.testing.contracts import EmbeddingBackendContract


class TestHashingContract(EmbeddingBackendContract):
    def make_backend(self) -> EmbeddingBackend:
        return HashingEmbedding()


class TestHashingFromRegistryContract(EmbeddingBackendContract):
    def make_backend(self) -> EmbeddingBackend:
        return load_embedding_backend("hashing", {"dimension": 128})


def test_dimension_is_configurable_and_recorded() -> None:
    backend = load_embedding_backend("hashing", {"dimension": 64})
    assert backend.name == "hashing" and backend.dimension == 64
    assert len(backend.embed_query("hello world")) == 64


def test_loader_reads_the_retrieval_section() -> None:
    from kairox_core.config import parse_config

    config = parse_config(
        {"retrieval": {"backend": "hashing", "backend_options": {"dimension": 96}}}
    )
    assert load_embedding_backend(config.retrieval).dimension == 96


def test_stable_across_processes() -> None:
    """crc32, not Python's salted hash(): vectors survive a restart."""
    code = (
        "from kairox_core.retrieval.embeddings import HashingEmbedding;"
        "print(HashingEmbedding(32).embed_query('stable vectors across runs'))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1
    assert outs.pop().strip() == str(HashingEmbedding(32).embed_query("stable vectors across runs"))


def test_empty_text_is_a_zero_vector() -> None:
    assert HashingEmbedding(16).embed_query("  ...  ") == [0.0] * 16


def test_shared_words_and_morphology_bring_texts_closer() -> None:
    b = HashingEmbedding()
    q = b.embed_query("indexing documents")
    near, far = b.embed_documents(["an index of the document", "volcanic lava flows"])
    assert sum(x * y for x, y in zip(q, near, strict=True)) > sum(
        x * y for x, y in zip(q, far, strict=True)
    )


def test_unknown_backend_names_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    from kairox_core.plugins import reset_plugins

    monkeypatch.setenv("KAIROX_LOAD_PLUGINS", "")  # built-ins only, whatever is installed
    reset_plugins()
    try:
        with pytest.raises(UnknownNameError, match="pip install kairox-sentence-transformers"):
            load_embedding_backend("sentence-transformers")
        with pytest.raises(UnknownNameError, match="use one of: hashing"):
            load_embedding_backend("no-such-backend")
    finally:
        monkeypatch.delenv("KAIROX_LOAD_PLUGINS")
        reset_plugins()


def test_bad_options_are_a_user_error() -> None:
    with pytest.raises(KairoxUserError, match="did you mean 'dimension'") as info:
        load_embedding_backend("hashing", {"dimensions": 12})
    assert "retrieval.backend_options.dimensions" in str(info.value)
    with pytest.raises(KairoxUserError, match="greater than or equal to 8"):
        load_embedding_backend("hashing", {"dimension": 2})
