"""Pure translation between Kairox and the Bedrock ``Retrieve`` shapes (no boto3 here).

Kairox filters (``{"field": value}`` or ``{"field": [allowed, ...]}``) become a Bedrock
``RetrievalFilter``; each ``KnowledgeBaseRetrievalResult`` becomes a ``RetrievalHit``.
Shapes follow botocore's service model ``bedrock-agent-runtime`` 2023-07-26.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from kairox_core.retrieval.base import RetrievalHit

# Bedrock's comparison operators, usable as {"field": {"greaterThan": 3}} in a Kairox filter.
OPERATORS = frozenset(
    {
        "equals",
        "notEquals",
        "greaterThan",
        "greaterThanOrEquals",
        "lessThan",
        "lessThanOrEquals",
        "in",
        "notIn",
        "startsWith",
        "listContains",
        "stringContains",
    }
)
# Where each location type keeps its address.
LOCATION_FIELDS: dict[str, tuple[str, str]] = {
    "S3": ("s3Location", "uri"),
    "WEB": ("webLocation", "url"),
    "CONFLUENCE": ("confluenceLocation", "url"),
    "SALESFORCE": ("salesforceLocation", "url"),
    "SHAREPOINT": ("sharePointLocation", "url"),
    "ONEDRIVE": ("oneDriveLocation", "url"),
    "GOOGLEDRIVE": ("googleDriveLocation", "url"),
    "CUSTOM": ("customDocumentLocation", "id"),
    "KENDRA": ("kendraDocumentLocation", "uri"),
    "SQL": ("sqlLocation", "query"),
}
SOURCE_URI_KEY = "x-amz-bedrock-kb-source-uri"
CHUNK_ID_KEY = "x-amz-bedrock-kb-chunk-id"
MAX_RESULTS = 100  # the model's maximum for numberOfResults


class FilterError(ValueError):
    """A Kairox filter that has no Bedrock equivalent."""


def _condition(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        if len(value) != 1:
            raise FilterError(
                f"filter on '{key}' must have exactly one Bedrock operator, got {sorted(value)}"
            )
        op, operand = next(iter(value.items()))
        if op not in OPERATORS:
            raise FilterError(
                f"unknown Bedrock filter operator '{op}' on '{key}'; "
                f"use one of: {', '.join(sorted(OPERATORS))}"
            )
        if op in ("in", "notIn") and not isinstance(operand, list | tuple):
            raise FilterError(f"operator '{op}' on '{key}' needs a list of values")
        return {op: {"key": key, "value": list(operand) if op in ("in", "notIn") else operand}}
    if isinstance(value, list | tuple | set | frozenset):
        values = list(value)
        if not values:
            raise FilterError(f"filter on '{key}' allows no value (empty list)")
        return {"in": {"key": key, "value": values}}
    if value is None or not isinstance(value, str | int | float | bool):
        raise FilterError(f"filter on '{key}' has a value Bedrock cannot compare: {value!r}")
    return {"equals": {"key": key, "value": value}}


def build_filter(filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A Bedrock ``RetrievalFilter`` for Kairox filters; ``andAll`` needs two or more."""
    if not filters:
        return None
    conditions = [_condition(str(key), value) for key, value in sorted(filters.items())]
    if len(conditions) == 1:
        return conditions[0]
    return {"andAll": conditions}


def build_request(
    knowledge_base_id: str,
    query: str,
    number_of_results: int,
    filters: Mapping[str, Any] | None,
    *,
    search_type: str | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``client.retrieve``."""
    vector: dict[str, Any] = {"numberOfResults": max(1, min(number_of_results, MAX_RESULTS))}
    bedrock_filter = build_filter(filters)
    if bedrock_filter is not None:
        vector["filter"] = bedrock_filter
    if search_type:
        vector["overrideSearchType"] = search_type
    return {
        "knowledgeBaseId": knowledge_base_id,
        "retrievalQuery": {"text": query},
        "retrievalConfiguration": {"vectorSearchConfiguration": vector},
    }


def location_of(result: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(location type, address) of one retrieval result, when it has one."""
    location = result.get("location") or {}
    ltype = location.get("type")
    if ltype in LOCATION_FIELDS:
        member, attr = LOCATION_FIELDS[ltype]
        address = (location.get(member) or {}).get(attr)
        if address:
            return ltype, str(address)
    for member, attr in LOCATION_FIELDS.values():  # a type this version does not know
        address = (location.get(member) or {}).get(attr)
        if address:
            return ltype, str(address)
    return ltype, None


def _text_of(content: Mapping[str, Any]) -> str:
    text = content.get("text")
    if isinstance(text, str) and text.strip():
        return text
    row = content.get("row")  # structured (SQL) knowledge bases return columns
    if isinstance(row, list) and row:
        return "\n".join(
            f"{col.get('columnName', '')}: {col.get('columnValue', '')}" for col in row
        )
    return ""


def to_hits(
    results: Iterable[Mapping[str, Any]], *, source: str, knowledge_base_id: str, k: int
) -> list[RetrievalHit]:
    """Map Bedrock results to hits: best first, one per document, at most ``k``.

    Results without text (images, audio) are skipped: the context window holds text.
    Several chunks of one document keep only the best one, so ``doc_id`` is unique.
    """
    hits: list[RetrievalHit] = []
    seen: set[str] = set()
    ranked = sorted(enumerate(results), key=lambda p: (-float(p[1].get("score") or 0.0), p[0]))
    for _, result in ranked:
        text = _text_of(result.get("content") or {})
        if not text:
            continue
        raw_meta = dict(result.get("metadata") or {})
        ltype, address = location_of(result)
        doc_id = (
            address
            or result.get("documentId")
            or raw_meta.get(SOURCE_URI_KEY)
            or "sha1:" + hashlib.sha1(text.encode("utf-8")).hexdigest()
        )
        doc_id = str(doc_id)
        if doc_id in seen:
            continue
        seen.add(doc_id)
        metadata: dict[str, Any] = {**raw_meta, "bedrock_knowledge_base_id": knowledge_base_id}
        if ltype:
            metadata["location_type"] = ltype
        if address:
            metadata["location"] = address
        chunk = raw_meta.get(CHUNK_ID_KEY)
        hits.append(
            RetrievalHit(
                text=text,
                score=float(result.get("score") or 0.0),
                source=source,
                doc_id=doc_id,
                metadata=metadata,
                chunk_id=str(chunk) if chunk is not None else None,
            )
        )
        if len(hits) >= k:
            break
    return hits
