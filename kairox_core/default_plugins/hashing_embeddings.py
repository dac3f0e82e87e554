"""Built-in plugin: the ``hashing`` embedding backend (no model, no dependency)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from kairox_core.hookspecs import EmbeddingBackendRegistrar, hookimpl

if TYPE_CHECKING:
    from kairox_core.retrieval.embeddings import HashingEmbedding


class HashingOptions(BaseModel):
    """``[retrieval] backend_options`` for ``backend = "hashing"``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dimension: int = Field(384, ge=8)
    char_ngrams: tuple[int, ...] = (3, 4)
    bigram_weight: float = Field(0.5, ge=0)
    char_weight: float = Field(0.35, ge=0)
    batch_size: int = Field(256, gt=0)
    cache_size: int = Field(16_384, ge=0)  # embeddings.CACHE_SIZE: why that size, there


def _factory(options: HashingOptions | None = None) -> HashingEmbedding:
    from kairox_core.retrieval.embeddings import HashingEmbedding

    o = options or HashingOptions()
    return HashingEmbedding(
        o.dimension,
        char_ngrams=o.char_ngrams,
        bigram_weight=o.bigram_weight,
        char_weight=o.char_weight,
        batch_size=o.batch_size,
        cache_size=o.cache_size,
    )


@hookimpl
def kairox_register_embedding_backends(register: EmbeddingBackendRegistrar) -> None:
    register("hashing", _factory, options=HashingOptions)
