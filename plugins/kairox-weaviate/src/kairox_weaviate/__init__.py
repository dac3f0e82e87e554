"""Kairox knowledge-base kind ``weaviate``: search a Weaviate collection (weaviate-client v4)."""

from __future__ import annotations

__all__ = ["__version__"]
__version__ = "0.1.0"
