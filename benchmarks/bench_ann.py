"""Benchmark: does the ANN graph (retrieval/ann.py) find what the exact scan finds?

For each data set, the documents are indexed into one space of a fresh database with
the default ``hashing`` backend, the space's graph is built (``build_ann``), and every
query is searched twice through ``WorkspaceRagIndex._vector``: through the graph and
through sqlite-vec's exact KNN (``KAIROX_ANN=0``). Reported: recall@10 and recall@100
of the graph against the exact results, and the median time of each search. A graph
of at most ``ann.EXACT_MAX`` vectors is scanned whole, not walked (``scanned_whole``);
``--walk`` walks every graph, as a larger space's searches do.

- ``scifact``: the SciFact corpus (5,183 abstracts) and its 1,109 queries
  (``../shared/data/scifact``, read at run time, never copied).
- ``locomo``: every turn of the LoCoMo dev conversations in one space (``ANN_MIN`` is
  lowered to their count for this run), the questions as queries.
- ``synthetic``: ``bench_context.py``'s 10k-message session (random words from a
  60-word vocabulary: nearly every pair of turns is equally similar, the hardest case
  for a graph and no realistic one), its own turns' prefixes as queries.

    python benchmarks/bench_ann.py [--data ../shared/data] [--queries 300] [--walk] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kairox_core.retrieval import ann
from kairox_core.retrieval.index import DocumentInput, WorkspaceRagIndex


def scifact(data: Path) -> tuple[list[str], list[str]]:
    docs = []
    for part in sorted((data / "scifact").glob("corpus-*.jsonl")):
        for line in part.read_text().splitlines():
            row = json.loads(line)
            docs.append(f"{row['title']}\n{row['text']}")
    queries = [
        json.loads(line)["text"]
        for line in (data / "scifact" / "queries.jsonl").read_text().splitlines()
    ]
    return docs, queries


def locomo(data: Path) -> tuple[list[str], list[str]]:
    items = json.loads((data / "locomo" / "locomo_dev3.json").read_text())
    docs, queries = [], []
    for item in items:
        conv = item["conversation"]
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list):
                docs += [f"{t['speaker']}: {t['text']}" for t in turns]
        queries += [qa["question"] for qa in item["qa"]]
    return docs, queries


def synthetic() -> tuple[list[str], list[str]]:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_context import synthetic as session

    texts = [f.get("text") or f.get("result", "") for _, f in session(10_000)]
    rng = random.Random(3)
    queries = [" ".join(rng.choice(texts).split()[:12]) for _ in range(1000)]
    return texts, queries


def measure(name: str, docs: list[str], queries: list[str], workdir: Path) -> dict[str, Any]:
    index = WorkspaceRagIndex(workdir / f"{name}.db", name)
    t0 = time.perf_counter()
    index.add_documents(
        [DocumentInput(doc_id=str(i), text=t) for i, t in enumerate(docs)], batch_size=512
    )
    indexed = time.perf_counter() - t0
    t0 = time.perf_counter()
    built = index.build_ann()
    build = time.perf_counter() - t0
    out: dict[str, Any] = {"documents": len(docs), "queries": len(queries), "graph": built}
    recalls: dict[int, list[float]] = {10: [], 100: []}
    times: dict[str, list[float]] = {"graph": [], "exact": []}
    for q in queries:
        for k in (10, 100):
            t0 = time.perf_counter()
            approx = index._vector(q, k, "", [], ("", []))
            times["graph"].append(time.perf_counter() - t0)
            os.environ["KAIROX_ANN"] = "0"
            t0 = time.perf_counter()
            exact = index._vector(q, k, "", [], ("", []))
            times["exact"].append(time.perf_counter() - t0)
            del os.environ["KAIROX_ANN"]
            truth = {d for _, d, _ in exact}
            if truth:
                recalls[k].append(len(truth & {d for _, d, _ in approx}) / len(truth))
    space = index.ann_space()
    vectors = len(space.graph) if space is not None and space.graph is not None else 0
    out["vectors"], out["scanned_whole"] = vectors, 0 < vectors <= ann.EXACT_MAX
    index.close()
    out.update(
        {
            "recall_at_10": round(statistics.mean(recalls[10]), 4),
            "recall_at_100": round(statistics.mean(recalls[100]), 4),
            "graph_ms": round(statistics.median(times["graph"]) * 1000, 3),
            "exact_ms": round(statistics.median(times["exact"]) * 1000, 3),
            "index_seconds": round(indexed, 1),
            "build_seconds": round(build, 1),
        }
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).parents[2] / "shared" / "data"))
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--sets", default="scifact,locomo,synthetic")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--walk", action="store_true", help="walk every graph (no whole scan)")
    args = parser.parse_args(argv)
    if args.walk:
        ann.EXACT_MAX = 0
    data = Path(args.data)
    if not (data / "scifact").is_dir():
        data = Path("/work/shared/data")
    results: dict[str, Any] = {
        "settings": {
            "connectivity": ann.CONNECTIVITY,
            "expansion_add": ann.EXPANSION_ADD,
            "expansion_search": ann.EXPANSION_SEARCH,
            "exact_max": ann.EXACT_MAX,
        }
    }
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets.split(","):
            docs, queries = {"scifact": lambda: scifact(data), "locomo": lambda: locomo(data)}.get(
                name, synthetic
            )()
            queries = rng.sample(queries, min(args.queries, len(queries)))
            saved = ann.ANN_MIN
            ann.ANN_MIN = min(saved, len(docs))
            try:
                results[name] = measure(name, docs, queries, Path(tmp))
            finally:
                ann.ANN_MIN = saved
            if not args.json:
                print(f"  {name}: {results[name]}", file=sys.stderr)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
