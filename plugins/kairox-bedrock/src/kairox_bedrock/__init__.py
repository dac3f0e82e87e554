"""Kairox knowledge-base kind ``bedrock``: Amazon Bedrock Knowledge Bases."""

from __future__ import annotations

__all__ = ["BedrockRetriever"]


def __getattr__(name: str) -> object:
    # Lazy: importing the package (as the plugin host does) must not import boto3.
    if name == "BedrockRetriever":
        from kairox_bedrock.retriever import BedrockRetriever

        return BedrockRetriever
    raise AttributeError(name)
