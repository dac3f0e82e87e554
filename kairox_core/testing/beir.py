"""BEIR datasets (SciFact's layout) and the metrics retrieval benchmarks report.

One copy for the core's and the plugins' benchmarks, so the figures they print are
computed the same way: nDCG@10 (graded gains, log2 discount) and Recall@100.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any


def load_corpus(data: Path) -> Iterator[dict[str, Any]]:
    """Documents of ``corpus-*.jsonl`` (in name order) or ``corpus.jsonl``."""
    for path in sorted(data.glob("corpus-*.jsonl")) or [data / "corpus.jsonl"]:
        with path.open(encoding="utf-8") as handle:
            yield from (json.loads(line) for line in handle if line.strip())


def load_queries(data: Path) -> dict[str, str]:
    with (data / "queries.jsonl").open(encoding="utf-8") as handle:
        return {q["_id"]: q["text"] for q in map(json.loads, handle) if q}


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query id -> {doc id: relevance} from a qrels TSV (header line skipped)."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            parts = line.strip().split("\t")
            if len(parts) == 3 and parts[0] != "query-id":
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return qrels


def ndcg_at(ranked: Sequence[str], rels: Mapping[str, int], k: int = 10) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rels.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: Sequence[str], rels: Mapping[str, int], k: int = 100) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def evaluate(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float]:
    """Mean nDCG@10 and Recall@100 of ``run`` (query id -> ranked doc ids)."""
    n = len(qrels)
    return {
        "ndcg@10": round(sum(ndcg_at(run.get(q, []), r) for q, r in qrels.items()) / n, 4),
        "recall@100": round(sum(recall_at(run.get(q, []), r) for q, r in qrels.items()) / n, 4),
    }


__all__ = ["evaluate", "load_corpus", "load_qrels", "load_queries", "ndcg_at", "recall_at"]
