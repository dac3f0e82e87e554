"""Kairox inside LangChain and LangGraph.

- ``KairoxChatMessageHistory``: a ``BaseChatMessageHistory`` over a Kairox session.
- ``KairoxRetriever``: a ``BaseRetriever`` over Kairox search (workspace index and
  knowledge bases, fused).
- ``KairoxStore``: a LangGraph ``BaseStore`` over memories and long-term chunks.
- ``KairoxChat``: any chat model behind Kairox's assembled context, as a runnable and a
  LangGraph node.
"""

from __future__ import annotations

from kairox_langchain.chat import KairoxChat, KairoxTurnReport
from kairox_langchain.errors import (
    UnknownNamespaceError,
    UnsupportedMessageError,
    UnsupportedValueError,
)
from kairox_langchain.history import KairoxChatMessageHistory
from kairox_langchain.retriever import KairoxRetriever
from kairox_langchain.store import KairoxStore

__all__ = [
    "KairoxChat",
    "KairoxChatMessageHistory",
    "KairoxRetriever",
    "KairoxStore",
    "KairoxTurnReport",
    "UnknownNamespaceError",
    "UnsupportedMessageError",
    "UnsupportedValueError",
]
