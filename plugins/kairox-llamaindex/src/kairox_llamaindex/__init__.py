"""Kairox inside LlamaIndex.

``KairoxMemory``: a LlamaIndex agent memory backed by a Kairox session (the assembled
context under the budget in, the turn's messages through the event store out, memory
markers through approval). ``KairoxRetriever``: Kairox search as a ``BaseRetriever``.
"""

from __future__ import annotations

from kairox_llamaindex.convert import UnsupportedMessageError
from kairox_llamaindex.memory import HistoryConflictError, KairoxMemory
from kairox_llamaindex.retriever import KairoxRetriever, KairoxSearchError

__all__ = [
    "HistoryConflictError",
    "KairoxMemory",
    "KairoxRetriever",
    "KairoxSearchError",
    "UnsupportedMessageError",
]
