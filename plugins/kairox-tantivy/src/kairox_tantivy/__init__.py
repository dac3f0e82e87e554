"""Kairox knowledge-base kind ``tantivy``: BM25 over a local Tantivy index."""

from __future__ import annotations

__all__ = ["IndexDoc", "IndexReport", "TantivyRetriever"]


def __getattr__(name: str) -> object:  # lazy: importing the package must not load tantivy
    if name in ("IndexReport", "TantivyRetriever"):
        from kairox_tantivy import retriever

        return getattr(retriever, name)
    if name == "IndexDoc":
        from kairox_tantivy.loader import IndexDoc

        return IndexDoc
    raise AttributeError(name)
