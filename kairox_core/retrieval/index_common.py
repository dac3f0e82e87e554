"""What every workspace index does the same way, whatever its database.

``WorkspaceRagIndex`` (SQLite) and kairox-postgres's ``PgWorkspaceIndex`` chunk, hash,
embed, batch, report statuses, fuse and build hits alike; only their SQL differs. The
dialect-free parts live here so the two cannot drift: a document hashed differently
would be re-embedded after ``kairox db copy``, a vector mixed differently would rank
differently. Both indexes import them from here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from kairox_core.retrieval.base import RetrievalHit, RetrieverError
from kairox_core.retrieval.chunking import Chunk, content_hash

if TYPE_CHECKING:
    from kairox_core.retrieval.documents import DocumentInput

D = TypeVar("D")

SOURCE = "workspace"
Ranked = list[tuple[int, int, float]]  # (chunk id, document row id, score), best first


def doc_hash(title: str, text: str, context: str = "") -> str:
    """A document's content hash: what decides "unchanged" (nothing re-embedded)."""
    extra = f"\x00context\x00{context}" if context else ""
    return content_hash(f"{title}\x00{text}{extra}")


def with_context(chunk: Chunk, context: str) -> Chunk:
    """The chunk keyed by its text and context: its vector depends on both."""
    if not context:
        return chunk
    return replace(chunk, content_hash=content_hash(f"{chunk.content_hash}\x00{context}"))


def statuses(batch: Sequence[DocumentInput], stored: Mapping[str, str]) -> list[str]:
    """ "added", "updated" or "unchanged" per ``DocumentInput``, in order, as if added one
    at a time (``stored``: content hash per doc id before the batch)."""
    seen = dict(stored)
    out = []
    for doc in batch:
        dhash = doc_hash(doc.title, doc.text, doc.context)
        before = seen.get(doc.doc_id)
        out.append("added" if before is None else "unchanged" if before == dhash else "updated")
        seen[doc.doc_id] = dhash
    return out


def last_per_doc_id(batch: Sequence[DocumentInput]) -> list[DocumentInput]:
    """A batch with each doc id once, its last version, in the order of those."""
    last = {doc.doc_id: i for i, doc in enumerate(batch)}
    return [batch[i] for i in sorted(last.values())]


def batches(docs: Iterable[D], size: int) -> Iterator[list[D]]:
    """``docs`` in lists of ``size`` (the last one shorter)."""
    batch: list[D] = []
    for doc in docs:
        batch.append(doc)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def metadata_json(metadata: Mapping[str, Any]) -> str:
    """A document's metadata as stored (sorted keys: equal metadata, equal text)."""
    return json.dumps(dict(metadata), sort_keys=True, default=str)


def mean_vector(vectors: Sequence[Sequence[float]]) -> list[float]:
    """The normalised sum of normalised vectors (cosine-equivalent to the mean).
    Element-wise in numpy (it is paid for every chunk with context, each turn); each
    norm's sum of squares stays Python's ``sum`` in order, so the floats are the ones
    the pure-Python loop gave (tests/test_mean_vector.py)."""
    import numpy as np  # (not at import: a search-only process may never write)

    total = np.zeros(len(vectors[0]), dtype=np.float64)
    for v in vectors:
        a = np.asarray(v, dtype=np.float64)
        norm = math.sqrt(sum((a * a).tolist())) or 1.0
        total += a / norm
    norm = math.sqrt(sum((total * total).tolist())) or 1.0
    out: list[float] = (total / norm).tolist()
    return out


def embed_texts(items: Sequence[tuple[str, str, str]]) -> list[str]:
    """What to embed for (text, heading, context) chunks: the chunk with its heading,
    and, for a chunk with context, context + text right after it."""
    texts: list[str] = []
    for text, heading, context in items:
        texts.append(f"{heading}\n{text}" if heading else text)
        if context:
            texts.append(f"{context}\n{text}")
    return texts


def chunk_vectors(
    items: Sequence[tuple[str, str, str]], vectors: Iterable[Sequence[float]]
) -> list[list[float]]:
    """Each chunk's vector from the embeddings of ``embed_texts(items)``: its own, or
    the mean of its own and its context's."""
    it = iter(vectors)
    out = []
    for _, _, context in items:
        own = list(next(it))
        out.append(mean_vector([own, list(next(it))]) if context else own)
    return out


def fuse_rankings(
    lists: Sequence[tuple[float, Ranked]], *, rrf_k: int = 60, limit: int | None = None
) -> Ranked:
    """Weighted reciprocal rank fusion of document rankings: sum(w / (rrf_k + rank))."""
    fused: dict[int, float] = {}
    best_chunk: dict[int, int] = {}
    for weight, ranked in lists:
        for rank, (cid, doc, _) in enumerate(ranked, start=1):
            fused[doc] = fused.get(doc, 0.0) + weight / (rrf_k + rank)
            best_chunk.setdefault(doc, cid)
    top = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [(best_chunk[doc], doc, score) for doc, score in top]


def collapse(
    fetch: Callable[[int], Ranked],
    k: int,
    *,
    max_limit: int | None = None,
    first: int | None = None,
) -> Ranked:
    """Best chunk per document from a ranked chunk list, over-fetching (``fetch(limit)``
    gives the top ``limit`` chunks) until ``k`` documents are found, the chunks run out
    or ``max_limit`` is reached (``first``: the first fetch's size, ``2k + 4`` unless
    given)."""
    limit = first or k * 2 + 4
    if max_limit is not None:
        limit = min(limit, max_limit)
    while True:
        rows = fetch(limit)
        seen: dict[int, tuple[int, int, float]] = {}
        for cid, doc, score in rows:
            seen.setdefault(doc, (cid, doc, score))
        if len(seen) >= k or len(rows) < limit or (max_limit is not None and limit >= max_limit):
            return list(seen.values())[:k]
        limit = limit * 4 if max_limit is None else min(limit * 4, max_limit)


def filter_values(key: str, value: Any) -> list[Any]:
    """A filter's allowed values (one or a list), checked: strings or numbers only."""
    values = list(value) if isinstance(value, list | tuple | set | frozenset) else [value]
    if not values:
        raise RetrieverError(SOURCE, f"filter '{key}' has no allowed value")
    for v in values:
        if not isinstance(v, str | int | float | bool):
            raise RetrieverError(
                SOURCE, f"filter '{key}': values must be strings or numbers, got {type(v).__name__}"
            )
    return values


def build_hits(
    ranked: Sequence[tuple[int, int, float]],
    rows: Mapping[int, Mapping[str, Any]],
    workspace_id: str,
) -> list[RetrievalHit]:
    """Hits in ``ranked`` order from chunk rows by id (keys ``text``, ``heading``,
    ``doc_id``, ``doc_type``, ``path``, ``title`` and ``metadata``, a dict or JSON)."""
    hits = []
    for cid, _, score in ranked:
        row = rows[cid]
        raw = row["metadata"]
        metadata: dict[str, Any] = dict(json.loads(raw) if isinstance(raw, str) else raw)
        metadata.update(
            {
                "doc_type": row["doc_type"],
                "path": row["path"],
                "title": row["title"],
                "heading": row["heading"],
                "workspace_id": workspace_id,
            }
        )
        hits.append(
            RetrievalHit(
                text=row["text"],
                score=float(score),
                source=SOURCE,
                doc_id=row["doc_id"],
                metadata=metadata,
                chunk_id=str(cid),
            )
        )
    return hits


__all__ = [
    "SOURCE",
    "Ranked",
    "batches",
    "build_hits",
    "chunk_vectors",
    "collapse",
    "doc_hash",
    "embed_texts",
    "filter_values",
    "fuse_rankings",
    "last_per_doc_id",
    "mean_vector",
    "metadata_json",
    "statuses",
    "with_context",
]
