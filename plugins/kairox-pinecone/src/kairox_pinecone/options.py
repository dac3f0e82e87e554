"""The ``[knowledge_bases.<id>]`` keys of kind ``pinecone``: the options model the plugin
registers, so the core validates them and reports errors like its own (file, key, fix).
No SDK import here: the plugin module imports this on every ``kairox`` start."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class PineconeOptions(BaseModel):
    """One namespace of a Pinecone index; ``api_key`` stays a ``$env:`` reference here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str  # the index host, e.g. "my-index-abc123.svc.us-east-1.pinecone.io"
    namespace: str = ""
    api_key: str | None = None  # "$env:PINECONE_API_KEY"; unset: PINECONE_API_KEY
    text_field: str = "text"
    doc_id_field: str | None = None
    embedding_backend: str = "hashing"  # a Kairox embedding backend for query vectors
    embedding_options: dict[str, Any] = Field(default_factory=dict)
    integrated_inference: bool = False  # the index embeds the text (records search API)
    filter: dict[str, Any] | None = None  # always applied, in Pinecone filter syntax
    min_score: float | None = None
    metric: Literal["cosine", "dotproduct", "euclidean"] = "cosine"

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(
                'is empty: give the index host, e.g. "my-index-abc123.svc.us-east-1.pinecone.io"'
            )
        return value.strip()
