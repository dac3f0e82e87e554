"""Kairox embedding backend ``sentence-transformers``; torch loads only when it is used."""

from __future__ import annotations

__all__ = ["SentenceTransformerEmbedding"]


def __getattr__(name: str) -> object:  # lazy: importing the package must not load torch
    if name == "SentenceTransformerEmbedding":
        from kairox_sentence_transformers.backend import SentenceTransformerEmbedding

        return SentenceTransformerEmbedding
    raise AttributeError(name)
