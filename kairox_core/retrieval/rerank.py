"""Rerankers: a slower, stronger second look at the fused top-N.

Fusion ranks by position in cheap rankings (BM25, one vector per passage); a reranker
such as a cross-encoder reads the query and each passage together, which ranks better
and costs a model call per passage. So it reorders only the first ``top_n`` fused hits
and the rest keep their fused order behind them. Rerankers come from plugins
(``kairox_register_rerankers``) and are chosen per profile
(``[profiles.<name>] reranker``), for workspace search and recall of past turns alike.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kairox_core.errors import KairoxUserError
from kairox_core.retrieval.base import Reranker as Reranker  # its home before base.py
from kairox_core.retrieval.base import RetrievalHit

if TYPE_CHECKING:
    from kairox_core.config import KairoxConfig

DEFAULT_TOP_N = 20


def rerank(
    reranker: Reranker, query: str, hits: Sequence[RetrievalHit], top_n: int = DEFAULT_TOP_N
) -> list[RetrievalHit]:
    """``hits`` with the first ``top_n`` reordered by ``reranker`` (ties keep fused order).

    Each reranked hit keeps its score and gains ``metadata["rerank_score"]`` and
    ``metadata["fused_rank"]`` (its 1-based place before reranking), for traces.
    """
    head, tail = list(hits[:top_n]), list(hits[top_n:])
    if not head or not query.strip():
        return list(hits)
    scores = [float(s) for s in reranker.score(query, [h.text for h in head])]
    if len(scores) != len(head):
        raise KairoxUserError(
            f"reranker '{reranker.name}' returned {len(scores)} scores for {len(head)} passages"
        )
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    reranked = [
        replace(
            head[i],
            metadata={**head[i].metadata, "rerank_score": scores[i], "fused_rank": i + 1},
        )
        for i in order
    ]
    return reranked + tail


def load_reranker(name: str, options: Mapping[str, Any] | None = None) -> Reranker:
    """A registered reranker built with ``options``; one per (factory, options) per process."""
    from kairox_core.plugins import RERANKERS, get_plugins
    from kairox_core.retrieval.warm import options_key, warm

    opts = dict(options or {})
    reg = get_plugins().get(RERANKERS, name, context="profiles.<name>.reranker")
    try:
        reranker = warm(
            ("rerankers", name, reg.factory, options_key(opts)), lambda: reg.factory(**opts)
        )
    except TypeError as exc:
        raise KairoxUserError(
            f"profiles.<name>.reranker_options: reranker '{name}' rejected its options: {exc}"
        ) from None
    if not isinstance(reranker, Reranker):
        raise KairoxUserError(f"reranker '{name}' (plugin {reg.plugin}) did not return a Reranker")
    return reranker


def reranker_for_profile(config: KairoxConfig, profile: str | None) -> tuple[Reranker | None, int]:
    """The profile's reranker (None when it sets none) and how many hits it reorders."""
    _, prof = config.resolve_profile(profile)
    top_n = int(prof.rerank_top_n)
    if not prof.reranker:
        return None, top_n
    return load_reranker(prof.reranker, prof.reranker_options), top_n


def rerank_for_profile(
    config: KairoxConfig, profile: str | None, query: str, hits: Sequence[RetrievalHit]
) -> list[RetrievalHit]:
    """``hits`` reranked as the profile says (unchanged when it names no reranker).

    For callers outside the composite retriever (recall of past turns): a reranker that
    fails while scoring is reported as a warning and the fused order is kept, so a turn
    never fails on it; a reranker that cannot be built (a configuration error) raises.
    """
    reranker, top_n = reranker_for_profile(config, profile)
    if reranker is None or len(hits) < 2:
        return list(hits)
    try:
        return rerank(reranker, query, hits, top_n)
    except Exception as exc:  # any scoring failure degrades to the fused order
        warnings.warn(
            f"kairox: reranker '{reranker.name}' failed, fused order kept: "
            f"{type(exc).__name__}: {exc}",
            RuntimeWarning,
            stacklevel=2,
        )
        return list(hits)
