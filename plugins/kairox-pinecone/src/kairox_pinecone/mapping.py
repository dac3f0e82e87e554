"""Pure translation between Kairox and Pinecone shapes (no SDK import here).

Kairox filters (``{"field": value}`` or ``{"field": [allowed, ...]}``) become Pinecone
metadata filters (``{"field": {"$eq": value}}`` / ``{"$in": [...]}``); a match or a
search hit becomes a ``RetrievalHit`` whose text is read from ``text_field``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kairox_core.retrieval.base import RetrievalHit

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"})
Scalar = (str, int, float, bool)


class FilterError(ValueError):
    """A Kairox filter that has no Pinecone equivalent."""


def _condition(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        if not value or not all(op in OPERATORS for op in value):
            raise FilterError(
                f"filter on '{key}' uses an unknown operator {sorted(value)}; "
                f"use {', '.join(sorted(OPERATORS))}"
            )
        for op in ("$in", "$nin"):
            if op in value and not isinstance(value[op], list | tuple):
                raise FilterError(f"operator '{op}' on '{key}' needs a list of values")
        return {op: list(v) if op in ("$in", "$nin") else v for op, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        values = list(value)
        if not values or not all(isinstance(v, Scalar) for v in values):
            raise FilterError(f"filter on '{key}' needs a non-empty list of plain values")
        return {"$in": values}
    if not isinstance(value, Scalar):
        raise FilterError(f"filter on '{key}' has a value Pinecone cannot compare: {value!r}")
    return {"$eq": value}


def build_filter(
    static: Mapping[str, Any] | None, filters: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The Pinecone filter: the knowledge base's own ``filter`` AND the call's filters."""
    clauses: list[dict[str, Any]] = []
    if static:
        clauses.append(dict(static))  # already in Pinecone syntax, from kairox.toml
    if filters:
        if any(str(key).startswith("$") for key in filters):
            raise FilterError("filter keys are metadata field names, not operators")
        clauses.append({str(k): _condition(str(k), v) for k, v in sorted(filters.items())})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


@dataclass(frozen=True)
class Found:
    """One match or hit, SDK-independent: id, score and the stored fields/metadata."""

    id: str
    score: float
    fields: Mapping[str, Any]


def to_hits(
    found: Iterable[Found],
    *,
    source: str,
    text_field: str,
    doc_id_field: str | None,
    k: int,
    min_score: float | None = None,
    metric: str = "cosine",
) -> tuple[list[RetrievalHit], int]:
    """(hits best first, one per document, at most ``k``; how many lacked ``text_field``).

    Pinecone returns the most similar first. A euclidean index scores by distance
    (lower is closer), so its scores become ``1 / (1 + distance)``: higher is better,
    as everywhere in Kairox.
    """
    hits: list[RetrievalHit] = []
    seen: set[str] = set()
    missing_text = 0
    for item in found:
        score = 1.0 / (1.0 + item.score) if metric == "euclidean" else float(item.score)
        if min_score is not None and score < min_score:
            continue
        text = item.fields.get(text_field)
        if not isinstance(text, str) or not text.strip():
            missing_text += 1
            continue
        raw_doc = item.fields.get(doc_id_field) if doc_id_field else None
        doc_id = str(raw_doc) if raw_doc not in (None, "") else item.id
        if doc_id in seen:
            continue
        seen.add(doc_id)
        metadata = {key: v for key, v in item.fields.items() if key != text_field}
        hits.append(
            RetrievalHit(
                text=text,
                score=score,
                source=source,
                doc_id=doc_id,
                metadata=metadata,
                chunk_id=item.id,
            )
        )
        if len(hits) >= k:
            break
    return hits, missing_text
