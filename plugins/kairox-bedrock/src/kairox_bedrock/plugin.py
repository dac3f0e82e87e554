"""Registers the ``bedrock`` knowledge-base kind. boto3 is imported only when it is used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_bedrock.options import BedrockOptions
from kairox_core.hookspecs import RetrieverRegistrar, hookimpl

if TYPE_CHECKING:
    from kairox_bedrock.retriever import BedrockRetriever
    from kairox_core.config import KnowledgeBaseConfig


def _factory(kb: KnowledgeBaseConfig, *, options: BedrockOptions | None = None) -> BedrockRetriever:
    from kairox_bedrock.retriever import BedrockRetriever

    return BedrockRetriever.from_config(kb, options)


@hookimpl
def kairox_register_retrievers(register: RetrieverRegistrar) -> None:
    register("bedrock", _factory, options=BedrockOptions)
