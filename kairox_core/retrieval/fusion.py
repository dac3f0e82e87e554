"""Reciprocal rank fusion across sources, merging duplicates by doc id or content."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kairox_core.retrieval.base import RetrievalHit

RRF_K = 60
_SPACE = re.compile(r"\s+")


def text_key(text: str) -> str:
    normal = _SPACE.sub(" ", text).strip().lower()
    return hashlib.blake2b(normal.encode("utf-8"), digest_size=12).hexdigest()


def rrf_fuse(
    rankings: Mapping[str, Sequence[RetrievalHit]],
    weights: Mapping[str, float] | None = None,
    *,
    k: int = RRF_K,
    limit: int | None = None,
) -> list[RetrievalHit]:
    """Fuse ranked lists (source name -> hits, best first) by weighted RRF.

    ``score = sum(weight / (k + rank))`` over the sources that returned the passage.
    A hit joins an earlier group when it is the same document or passage: the same
    doc id, or the same normalised text. The group keeps its best-ranked hit's text
    and lists every source in ``metadata["sources"]``. A source's own duplicates (one
    text in several of its documents) add nothing: each source counts once per
    passage, so a score never grows with how deep the lists go, and the result for
    ``limit`` k is the top k of the result for any larger limit.
    """
    weights = weights or {}
    groups: list[dict[str, Any]] = []
    by_key: dict[str, int] = {}
    for source, hits in rankings.items():
        weight = float(weights.get(source, 1.0))
        for rank, hit in enumerate(hits, start=1):
            keys = (f"id:{hit.doc_id}", f"text:{text_key(hit.text)}")
            gi = next((by_key[key] for key in keys if key in by_key), None)
            contribution = weight / (k + rank)
            if gi is None:
                gi = len(groups)
                groups.append({"hit": hit, "score": 0.0, "best": contribution, "sources": []})
            group = groups[gi]
            for key in keys:
                by_key.setdefault(key, gi)
            if source in group["sources"]:
                continue  # this source already ranked this passage higher
            group["score"] += contribution
            group["sources"].append(source)
            if contribution > group["best"]:
                group["hit"], group["best"] = hit, contribution
    order = sorted(range(len(groups)), key=lambda i: (-groups[i]["score"], i))
    fused = []
    for i in order[:limit]:
        group = groups[i]
        best: RetrievalHit = group["hit"]
        metadata = {**best.metadata, "sources": list(group["sources"]), "source_score": best.score}
        fused.append(replace(best, score=float(group["score"]), metadata=metadata))
    return fused
