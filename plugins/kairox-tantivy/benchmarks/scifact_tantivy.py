"""SciFact keyword retrieval with the ``tantivy`` knowledge base, against raw Tantivy.

Builds a Tantivy index of the corpus (corpus-*.jsonl in order; title and abstract as
separate fields, the title boosted) in a temporary directory, then in the same run:

- quality: nDCG@10 and Recall@100 over the qrels (train by default) for the Kairox
  retriever and for the same Tantivy query issued by hand;
- speed: the time of ``await retriever.retrieve(query, k)`` against the same searcher
  calls made directly (parse_query, search, doc, snippet), as ratios: against those
  calls each run in a worker thread (``asyncio.to_thread``, as Kairox runs them: this
  isolates Kairox's own cost) and against a plain loop in the main thread (which is
  slower here: Tantivy's snippets cost more on the main thread). Each query runs on
  all three sides back to back, in rotating order, so machine load hits all alike.

    python plugins/kairox-tantivy/benchmarks/scifact_tantivy.py /path/to/scifact --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from kairox_core.testing.beir import evaluate, load_corpus, load_qrels, load_queries

HERE = Path(__file__).resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "data",
        type=Path,
        nargs="?",
        default=HERE.parents[4] / "shared" / "data" / "scifact",
        help="BEIR SciFact folder (corpus-*.jsonl, queries.jsonl, qrels/)",
    )
    parser.add_argument(
        "--qrels", type=Path, default=None, help="qrels TSV (default: DATA/qrels/train.tsv)"
    )
    parser.add_argument(
        "--title-boost", type=float, default=None, help="default: the plugin's default"
    )
    parser.add_argument("--tokenizer", default="en_stem")
    parser.add_argument("--k", type=int, default=10, help="hits per timed query")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of each side")
    parser.add_argument(
        "--scale",
        type=int,
        default=None,
        metavar="N",
        help="index N documents (the corpus repeated under new ids) and report "
        "speed only, e.g. 100000 for the 100k-chunk figure",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    import tantivy

    from kairox_core.config import KnowledgeBaseConfig
    from kairox_tantivy import query as q
    from kairox_tantivy.loader import IndexDoc
    from kairox_tantivy.retriever import TantivyRetriever

    qrels = load_qrels(args.qrels or args.data / "qrels" / "train.tsv")
    all_queries = load_queries(args.data)
    docs = list(load_corpus(args.data))
    if args.scale:
        base = docs
        docs = [
            dict(d, _id=f"{d['_id']}~{i // len(base)}") if i >= len(base) else d
            for i, d in ((i, base[i % len(base)]) for i in range(args.scale))
        ]
    qids = sorted(qid for qid in qrels if qid in all_queries)
    qrels = {qid: qrels[qid] for qid in qids}
    queries = {qid: all_queries[qid] for qid in qids}

    with tempfile.TemporaryDirectory() as tmp:
        options = {"path": str(Path(tmp) / "index"), "tokenizer": args.tokenizer}
        if args.title_boost is not None:
            options["title_boost"] = args.title_boost
        kb = KnowledgeBaseConfig.model_validate({"id": "scifact", "kind": "tantivy", **options})
        retriever = TantivyRetriever(kb)
        started = time.perf_counter()
        retriever.add_documents(IndexDoc(d["_id"], d.get("title", ""), d["text"]) for d in docs)
        index_seconds = time.perf_counter() - started

        # the raw side: the same index, the same searcher calls, no Kairox around them
        index = tantivy.Index.open(str(Path(tmp) / "index"))
        boosts = {"title": retriever.options.title_boost, "body": retriever.options.body_boost}
        words = {qid: " ".join(q.query_words(text)) for qid, text in queries.items()}

        def raw(text: str, k: int, snippets: bool) -> list[str]:
            searcher = index.searcher()
            query = index.parse_query(text, list(boosts), field_boosts=boosts)
            hits = searcher.search(query, k, count=False).hits
            gen = None
            if snippets and hits:
                gen = tantivy.SnippetGenerator.create(searcher, query, index.schema, "body")
                gen.set_max_num_chars(200)
            ids = []
            for _, addr in hits:
                doc = searcher.doc(addr)
                if gen is not None:
                    gen.snippet_from_doc(doc).fragment()
                ids.append(doc["doc_id"][0])
            return ids

        async def kairox_run(k: int) -> dict[str, list[str]]:
            return {
                qid: [h.doc_id for h in await retriever.retrieve(text, k)]
                for qid, text in queries.items()
            }

        kairox_quality: Mapping[str, float | None] = {"ndcg@10": None, "recall@100": None}
        raw_quality = kairox_quality
        if not args.scale:  # relevance only means something on the real corpus
            kairox_quality = evaluate(asyncio.run(kairox_run(100)), qrels)
            raw_quality = evaluate(
                {qid: raw(text, 100, False) for qid, text in words.items()}, qrels
            )

        # per query, the three sides back to back in rotating order: load drift on a
        # shared machine then hits all three alike
        totals = {"kairox": 0.0, "raw": 0.0, "raw_thread": 0.0}

        async def timed_rounds() -> None:
            async def kairox_side(text: str) -> None:
                await retriever.retrieve(text, args.k)

            async def thread_side(text: str) -> None:
                await asyncio.to_thread(raw, text, args.k, True)

            async def raw_side(text: str) -> None:
                raw(text, args.k, True)

            sides = [("kairox", kairox_side), ("raw_thread", thread_side), ("raw", raw_side)]
            turn = 0
            for _ in range(args.rounds):
                for qid, text in queries.items():
                    turn += 1
                    for name, side in sides[turn % 3 :] + sides[: turn % 3]:
                        t0 = time.perf_counter()
                        await side(text if name == "kairox" else words[qid])
                        totals[name] += time.perf_counter() - t0

        asyncio.run(timed_rounds())
        asyncio.run(retriever.close())

    n = len(queries)
    per_query = {name: total / (n * args.rounds) * 1000 for name, total in totals.items()}
    kairox_ms, raw_ms, thread_ms = per_query["kairox"], per_query["raw"], per_query["raw_thread"]
    result = {
        "engine": "tantivy",
        "tantivy_version": getattr(tantivy, "__version__", "?"),
        "documents": len(docs),
        "queries": n,
        "title_boost": retriever.options.title_boost,
        "tokenizer": args.tokenizer,
        "ndcg@10": kairox_quality["ndcg@10"],
        "recall@100": kairox_quality["recall@100"],
        "raw_ndcg@10": raw_quality["ndcg@10"],
        "raw_recall@100": raw_quality["recall@100"],
        "index_seconds": round(index_seconds, 2),
        "query_ms_kairox": round(kairox_ms, 3),
        "query_ms_raw": round(raw_ms, 3),
        "query_ms_raw_in_thread": round(thread_ms, 3),
        # Kairox's own cost: the same calls, each run in a worker thread as Kairox runs them
        "ratio_vs_raw_in_thread": round(kairox_ms / thread_ms, 3),
        # against a plain synchronous loop in the main thread (what a script would write)
        "ratio_vs_raw": round(kairox_ms / raw_ms, 3),
        "k": args.k,
        "rounds": args.rounds,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>16}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
