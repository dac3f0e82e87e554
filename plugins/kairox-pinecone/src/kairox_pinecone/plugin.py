"""Registers the ``pinecone`` knowledge-base kind. The SDK is imported only when it is used."""

from __future__ import annotations

from typing import Any

from kairox_core.hookspecs import Register, hookimpl


def _factory(kb: Any) -> Any:
    from kairox_pinecone.retriever import PineconeRetriever

    return PineconeRetriever.from_config(kb)


@hookimpl
def kairox_register_retrievers(register: Register) -> None:
    register("pinecone", _factory)
