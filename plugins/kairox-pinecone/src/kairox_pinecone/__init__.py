"""Kairox knowledge-base kind ``pinecone``: a Pinecone index through the pinecone SDK."""

from __future__ import annotations

__all__ = ["PineconeRetriever"]


def __getattr__(name: str) -> object:
    # Lazy: importing the package (as the plugin host does) must not import the SDK.
    if name == "PineconeRetriever":
        from kairox_pinecone.retriever import PineconeRetriever

        return PineconeRetriever
    raise AttributeError(name)
