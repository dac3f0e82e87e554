"""Registers the embedding backend ``sentence-transformers``; torch loads in the factory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kairox_core.hookspecs import Register, hookimpl

if TYPE_CHECKING:
    from kairox_sentence_transformers.backend import SentenceTransformerEmbedding


def make_backend(**options: Any) -> SentenceTransformerEmbedding:
    """``[retrieval.backend_options]`` -> a loaded backend (see the README for the keys)."""
    from kairox_sentence_transformers.backend import SentenceTransformerEmbedding

    return SentenceTransformerEmbedding(**options)


@hookimpl
def kairox_register_embedding_backends(register: Register) -> None:
    register("sentence-transformers", make_backend)
