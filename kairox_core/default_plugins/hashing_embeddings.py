"""Built-in plugin: the ``hashing`` embedding backend (no model, no dependency)."""

from __future__ import annotations

from typing import Any

from kairox_core.hookspecs import Register, hookimpl


def _factory(**options: Any) -> Any:
    from kairox_core.retrieval.embeddings import HashingEmbedding

    return HashingEmbedding(**options)


@hookimpl
def kairox_register_embedding_backends(register: Register) -> None:
    register("hashing", _factory)
