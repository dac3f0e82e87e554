"""Benchmark: the floor under a cold turn, beside Kairox's cold turn and ``trim_messages``.

Issue 18 asks for the first turn after opening a 10k-message session to be 100x faster
than langchain-core's ``trim_messages`` over the same messages. This measures what any
cold turn of the default configuration has to do at the least, each step as one bare
library call on a fresh connection with no Kairox code around it:

- the first write (the user's message, one WAL commit);
- reading the rows of the history that fits the budget, newest first (plain tuples);
- making them the messages a model is sent (one dict each);
- embedding the prompt (the hashing backend) and one search of the recall space's
  HNSW graph after mapping its file (usearch, ``view=True``; scanned whole up to
  ``ann.EXACT_MAX`` vectors, as recall's search does);
- one keyword query of the prompt's chosen terms (FTS5 bm25);
- writing the reply (one WAL commit).

Opening the connection is timed apart and left out of the floor, as ``Kairox.open``
pays it before the first turn. The session, the Kairox cold turn (its median over a few
fresh opens) and ``trim_messages`` come from ``bench_context.py``, in the same run. If
the floor alone is over a hundredth of ``trim_messages``, no cold turn that stores
history in SQLite and recalls past turns reaches 100x on this machine.

    python benchmarks/bench_cold_floor.py [--messages 10000] [--repeats 9] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_context as bc

from kairox_core import Kairox
from kairox_core.recall.engine import recall_of
from kairox_core.retrieval import ann
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.fts import query_terms, terms_expression
from kairox_core.retrieval.index import FTS_TOKENIZE
from kairox_core.retrieval.keyword_terms import TermSelector
from kairox_core.store.connection import connect

PROMPT = "what is the deadline?"  # bench_context's cold turn asks this
REPLY = bc.words(random.Random(0), 200, 230)
HISTORY_SQL = (
    "SELECT seq, kind, turn_id, tokens, extra, text FROM history "
    "WHERE session_id = ? ORDER BY seq DESC LIMIT ?"
)
KEYWORD_SQL = (
    "SELECT rowid, bm25(rag_fts, 1.0, 1.0, 0.0) AS s FROM rag_fts "
    "WHERE rag_fts MATCH ? ORDER BY s LIMIT ?"
)


def graph_file(db: Path) -> Path:
    """The recall space's graph (``Recall.index_all`` builds it at 2,048 turns)."""
    files = sorted(Path(f"{db}-ann").rglob("*.usearch"), key=lambda p: p.stat().st_size)
    if not files:
        raise SystemExit(f"no HNSW graph under {db}-ann: the session is below 2,048 turns")
    return files[-1]


def rows_in_context(db: Path, session_id: str, messages: int) -> int:
    """History rows holding the ``messages`` newest messages (a tool row holds two)."""
    conn = connect(db)
    try:
        count = rows = 0
        for (kind,) in conn.execute(
            "SELECT kind FROM history WHERE session_id = ? ORDER BY seq DESC", (session_id,)
        ):
            if count >= messages:
                break
            count += 2 if kind == 2 else 1
            rows += 1
        return rows
    finally:
        conn.close()


def index_rest(db: Path, session_id: str) -> None:
    """Index the turns the last open left for its background indexer."""
    kx = Kairox.open(db, bc.bench_config())
    try:
        recall_of(kx).index_all(kx.session(session_id=session_id))
    finally:
        kx.close()


def keyword_expression(db: Path) -> str:
    """The MATCH expression the recall index asks for the prompt (its chosen terms)."""
    conn = connect(db)
    try:
        words = TermSelector(conn, "rag_fts", "rag_chunks", FTS_TOKENIZE).select(
            query_terms(PROMPT)
        )
        return terms_expression(words) or '""'
    finally:
        conn.close()


def floor_once(
    db: Path, session_id: str, rows: int, graph: Path, expr: str, backend: HashingEmbedding
) -> dict[str, float]:
    """One cold pass of the bare steps on a fresh connection: seconds per step."""
    import numpy as np
    from usearch.index import Index

    times: dict[str, float] = {}

    def step(name: str, t0: float) -> float:
        now = time.perf_counter()
        times[name] = now - t0
        return now

    t = time.perf_counter()
    conn = connect(db)
    t = step("connect", t)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO floor_scratch (data) VALUES (?)", (PROMPT,))
    conn.execute("COMMIT")
    t = step("write prompt", t)
    cursor = conn.cursor()
    cursor.row_factory = None
    found = cursor.execute(HISTORY_SQL, (session_id, rows)).fetchall()
    t = step("history rows", t)
    messages = [{"role": "user" if r[1] == 0 else "assistant", "content": r[5]} for r in found]
    t = step("history messages", t)
    query = np.asarray(backend.embed_query(PROMPT), dtype=np.float32)
    t = step("embed prompt", t)
    index: Any = Index.restore(str(graph), view=True)  # usearch types it read-only
    t = step("map graph", t)
    if index is None:
        raise SystemExit(f"{graph} is not a usearch index")
    scan = len(index) <= ann.EXACT_MAX  # the cheaper of the two, as the recall search does
    if not scan:
        index.expansion_search = ann.EXPANSION_SEARCH
    index.search(query / (float(np.linalg.norm(query)) or 1.0), 40, threads=1, exact=scan)
    t = step("graph search", t)
    conn.execute(KEYWORD_SQL, (expr, 40)).fetchall()
    t = step("keyword query", t)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO floor_scratch (data) VALUES (?)", (REPLY,))
    conn.execute("COMMIT")
    step("write reply", t)
    conn.close()
    del index, messages
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=9, help="cold passes of the floor")
    parser.add_argument("--opens", type=int, default=5, help="fresh opens timed for Kairox")
    parser.add_argument("--json", action="store_true", help="print only JSON")
    args = parser.parse_args(argv)
    system = "You are a helpful assistant for the bench project."
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bc.bench_size(50, 1, 0, work)  # process start-up outside the figures
        db = work / "floor.db"
        session_id, _, _, _ = bc.build_session(db, args.messages, system)
        kairox = []
        for i in range(args.opens):  # each open's cold turn starts with every turn indexed
            kairox.append(bc.time_turns(db, session_id, system, 1, recall=True, seed=i))
            index_rest(db, session_id)
        cold_ms = statistics.median(k["first_turn_ms"] for k in kairox)
        rows = rows_in_context(db, session_id, kairox[-1]["history_messages_in_context"])
        graph, expr, backend = graph_file(db), keyword_expression(db), HashingEmbedding()
        setup = connect(db)
        setup.execute("CREATE TABLE floor_scratch (id INTEGER PRIMARY KEY, data TEXT)")
        setup.close()
        floor_once(db, session_id, rows, graph, expr, backend)  # imports, first mapping
        passes = [
            floor_once(db, session_id, rows, graph, expr, backend) for _ in range(args.repeats)
        ]
        lc = bc.to_langchain(bc.synthetic(args.messages), system)
        trim_ms = bc.bench_baseline(lc, bc.WINDOW - bc.RESERVE, 3)["seconds"] * 1000
    steps = {k: round(statistics.median(p[k] for p in passes) * 1000, 3) for k in passes[0]}
    floor_ms = statistics.median(sum(v for k, v in p.items() if k != "connect") for p in passes)
    floor_ms *= 1000
    result: dict[str, Any] = {
        "messages": args.messages,
        "history_rows_read": rows,
        "keyword_expression": expr,
        "steps_ms": steps,
        "floor_ms": round(floor_ms, 3),
        "kairox_cold_turn_ms": round(cold_ms, 3),
        "kairox_cold_turns_ms": [k["first_turn_ms"] for k in kairox],
        "kairox_cold_over_floor": round(cold_ms / floor_ms, 2),
        "trim_messages_ms": round(trim_ms, 1),
        "cold_turn_allowed_ms_for_100x": round(trim_ms / 100, 3),
        "speedup_floor_vs_trim_messages": round(trim_ms / floor_ms, 1),
        "speedup_kairox_cold_vs_trim_messages": round(trim_ms / cold_ms, 1),
        "floor_over_100x_budget": floor_ms > trim_ms / 100,
    }
    if not args.json:
        for name, ms in steps.items():
            note = "  (Kairox.open's, left out)" if name == "connect" else ""
            print(f"  {name:18s} {ms:7.3f} ms{note}", file=sys.stderr)
        print(
            f"  floor {floor_ms:.2f} ms, Kairox cold turn {cold_ms:.2f} ms, trim_messages "
            f"{trim_ms:.0f} ms: 100x needs <= {trim_ms / 100:.2f} ms",
            file=sys.stderr,
        )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
