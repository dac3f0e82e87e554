"""Kairox embedding backend ``sentence-transformers`` and reranker ``cross-encoder``;
torch loads only when one is used."""

from __future__ import annotations

__all__ = ["CrossEncoderReranker", "SentenceTransformerEmbedding"]


def __getattr__(name: str) -> object:  # lazy: importing the package must not load torch
    if name == "SentenceTransformerEmbedding":
        from kairox_sentence_transformers.backend import SentenceTransformerEmbedding

        return SentenceTransformerEmbedding
    if name == "CrossEncoderReranker":
        from kairox_sentence_transformers.reranker import CrossEncoderReranker

        return CrossEncoderReranker
    raise AttributeError(name)
