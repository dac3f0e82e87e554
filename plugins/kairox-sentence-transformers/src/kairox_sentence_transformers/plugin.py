"""Registers the embedding backend ``sentence-transformers`` and the reranker
``cross-encoder``; torch loads in the factories."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kairox_core.hookspecs import EmbeddingBackendRegistrar, RerankerRegistrar, hookimpl

if TYPE_CHECKING:
    from kairox_sentence_transformers.backend import SentenceTransformerEmbedding
    from kairox_sentence_transformers.reranker import CrossEncoderReranker


def make_backend(**options: Any) -> SentenceTransformerEmbedding:
    """``[retrieval.backend_options]`` -> a loaded backend (see the README for the keys)."""
    from kairox_sentence_transformers.backend import SentenceTransformerEmbedding

    return SentenceTransformerEmbedding(**options)


@hookimpl
def kairox_register_embedding_backends(register: EmbeddingBackendRegistrar) -> None:
    register("sentence-transformers", make_backend)


def make_reranker(**options: Any) -> CrossEncoderReranker:
    """``[profiles.<name>] reranker_options`` -> a loaded cross-encoder (README: the keys)."""
    from kairox_sentence_transformers.reranker import CrossEncoderReranker

    return CrossEncoderReranker(**options)


@hookimpl
def kairox_register_rerankers(register: RerankerRegistrar) -> None:
    register("cross-encoder", make_reranker)
