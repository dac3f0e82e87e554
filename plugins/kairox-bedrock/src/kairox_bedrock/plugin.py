"""Registers the ``bedrock`` knowledge-base kind. boto3 is imported only when it is used."""

from __future__ import annotations

from typing import Any

from kairox_core.hookspecs import Register, hookimpl


def _factory(kb: Any) -> Any:
    from kairox_bedrock.retriever import BedrockRetriever

    return BedrockRetriever.from_config(kb)


@hookimpl
def kairox_register_retrievers(register: Register) -> None:
    register("bedrock", _factory)
