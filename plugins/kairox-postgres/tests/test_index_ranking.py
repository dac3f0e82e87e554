"""BM25 like FTS5's, statistics kept in step, HNSW with filters: against SQLite and exact scans."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from kairox_core.config import KairoxConfig
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.index import DocumentInput, WorkspaceRagIndex
from kairox_postgres.index import PgWorkspaceIndex, _vector_text
from kairox_postgres.storage import PostgresStorage

VOCAB = [f"w{i}" for i in range(300)] + ["launch", "launched", "launches", "review", "café"]


def _corpus(n: int, seed: int, **fields: object) -> list[DocumentInput]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        # a Zipf-like draw: a few common words, many rare ones
        words = [VOCAB[min(int(rng.paretovariate(1.1)) - 1, len(VOCAB) - 1)] for _ in range(30)]
        docs.append(DocumentInput(f"d{seed}-{i}", " ".join(words), **fields))  # type: ignore[arg-type]
    return docs


@pytest.fixture
def storage(pg_url: str) -> Iterator[PostgresStorage]:
    s = PostgresStorage(pg_url, max_connections=2)
    yield s
    s.close()


QUERIES = ["w3 w40 launch", "w1 w2", "launched review w77 w150", "café w5", "w299 w0 w8 w9"]


def test_keyword_scores_are_sqlite_fts5_bm25(storage: PostgresStorage, tmp_path: Path) -> None:
    plan = "# Launch plan\n\nThe launch moved; the review stays."
    docs = [*_corpus(400, 1), DocumentInput("h", plan, doc_type="md")]
    pg = storage.workspace_index(KairoxConfig(), "w")
    lite = WorkspaceRagIndex.from_config(KairoxConfig(), tmp_path / "kx.db", "w")
    for index in (pg, lite):
        index.add_documents(docs)
    for query in [*QUERIES, "launch plan"]:
        want = [(h.doc_id, h.score) for h in lite.search(query, 20, "keyword")]
        got = [(h.doc_id, h.score) for h in pg.search(query, 20, "keyword")]
        assert len(got) == len(want) > 0, query
        for (gd, gs), (wd, ws) in zip(got, want, strict=True):
            assert gs == pytest.approx(ws, rel=1e-9), (query, gd, wd)
        # equal scores may tie-break apart; the score-ordered sets agree
        assert {d for d, _ in got} == {d for d, _ in want} or len(got) == 20, query
    lite.close()


def _stats_consistent(storage: PostgresStorage, space: str) -> None:
    df = storage.db.execute(
        "SELECT t.term, t.df, (SELECT count(*) FROM rag_postings p WHERE p.term_id = t.id) AS n "
        "FROM rag_terms t WHERE t.workspace_id = %s",
        (space,),
    )
    assert all(int(r["df"]) == int(r["n"]) for r in df)
    total = storage.db.execute(
        "SELECT count(*) AS n, coalesce(sum(kw_len), 0) AS t FROM rag_chunks "
        "WHERE workspace_id = %s",
        (space,),
    )[0]
    kept = storage.db.execute(
        "SELECT chunks, tokens FROM rag_kw_spaces WHERE workspace_id = %s", (space,)
    )
    assert (int(kept[0]["chunks"]), int(kept[0]["tokens"])) == (int(total["n"]), int(total["t"]))


def test_statistics_follow_updates_deletes_and_other_spaces(storage: PostgresStorage) -> None:
    a = storage.workspace_index(KairoxConfig(), "a")
    b = storage.workspace_index(KairoxConfig(), "b")
    a.add_documents(_corpus(60, 2))
    b.add_documents(_corpus(30, 3))
    a.add_documents([DocumentInput("d2-0", "launch launch review"), DocumentInput("x", "")])
    assert a.delete_many(["d2-1", "d2-2", "nope"]) == 2
    for space in ("a", "b"):
        _stats_consistent(storage, space)
    n = storage.db.execute("SELECT chunks FROM rag_kw_spaces WHERE workspace_id = 'a'")
    assert int(n[0]["chunks"]) == a.chunk_count() == 58  # "x" is empty: no chunk
    # each space ranks by its own statistics: b's top hit is b's, never a's
    assert {h.doc_id for h in b.search("w1 launch", 30, "keyword")} <= {
        d.doc_id for d in _corpus(30, 3)
    }
    # rows written without terms (an older schema, a copy) get them on first use
    storage.db.execute("DELETE FROM rag_postings")
    storage.db.execute("UPDATE rag_chunks SET kw_len = NULL WHERE workspace_id = 'a'")
    before = [h.doc_id for h in b.search("w1 w2", 5, "keyword")]
    fresh = storage.workspace_index(KairoxConfig(), "a")
    assert fresh.ensure_keywords() == 58
    _stats_consistent(storage, "a")
    assert fresh.search("launch review", 1, "keyword")[0].doc_id == "d2-0"
    assert before == [h.doc_id for h in b.search("w1 w2", 5, "keyword")]


def _exact(storage: PostgresStorage, index: PgWorkspaceIndex, query: str, where: str) -> list[int]:
    vec = _vector_text(index.backend.embed_query(query))
    rows = storage.db.execute(
        "SELECT c.id FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id "
        f"WHERE c.workspace_id = %s{where} ORDER BY c.embedding <=> %s::vector, c.id LIMIT 10",
        (index.workspace_id, vec),
    )
    return [int(r["id"]) for r in rows]


def test_hnsw_with_filters_returns_k_rows(storage: PostgresStorage) -> None:
    backend = HashingEmbedding(64)
    big = storage.workspace_index(KairoxConfig(), "big", backend=backend)
    big.add_documents(_corpus(2500, 4), batch_size=500)
    big.add_documents(_corpus(25, 5, doc_type="rare", metadata={"team": "x"}))
    small = storage.workspace_index(KairoxConfig(), "small", backend=backend)
    small.add_documents(_corpus(12, 6))
    big.optimize()
    assert storage.db.execute("SELECT to_regclass('rag_chunks_hnsw_64') AS i")[0]["i"]
    query = "w3 w40 launch w7"
    vec = _vector_text(backend.embed_query(query))
    raw = (
        "SELECT c.id FROM rag_chunks c JOIN rag_documents d ON d.id = c.document_id "
        "WHERE c.workspace_id = 'big' AND vector_dims(c.embedding) = 64 "
        "AND d.doc_type = 'rare' ORDER BY c.embedding::vector(64) <=> %s::vector(64) LIMIT 10"
    )
    with storage.db.connection() as conn:  # the filter starves a plain HNSW scan
        plan = "\n".join(r["QUERY PLAN"] for r in conn.execute("EXPLAIN " + raw, (vec,)))
        assert "rag_chunks_hnsw_64" in plan
        conn.execute("SET hnsw.iterative_scan = off")
        starved = conn.execute(raw, (vec,)).fetchall()
        conn.execute("RESET hnsw.iterative_scan")
    assert len(starved) < 10
    for filters, where in (
        ({"doc_type": "rare"}, " AND d.doc_type = 'rare'"),
        ({"team": "x"}, " AND d.metadata ->> 'team' = 'x'"),
    ):
        hits = big.search(query, 10, "vector", filters)
        assert len(hits) == 10 and all(h.metadata["doc_type"] == "rare" for h in hits)
        exact = _exact(storage, big, query, where)
        assert len(set(int(h.chunk_id) for h in hits) & set(exact)) >= 9  # approximate
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
    # a small space among many rows: all of its chunks, none of the other space
    hits = small.search(query, 20, "vector")
    assert {h.doc_id for h in hits} == {d.doc_id for d in _corpus(12, 6)}
    # unfiltered: the index's answer is (nearly) the exact one
    hits = big.search(query, 10, "vector")
    assert len(set(int(h.chunk_id) for h in hits) & set(_exact(storage, big, query, ""))) >= 8


def test_common_words_are_chosen_like_sqlite(storage: PostgresStorage, tmp_path: Path) -> None:
    """Past WEIGHTLESS_ROWS chunks, a word in half the space or more is dropped from the
    query (its bm25 weight is ~0), as in SQLite; a query of such words only keeps the
    rarest."""
    rng = random.Random(9)
    docs = [
        DocumentInput(
            f"d{i}",
            " ".join(
                ["common", "often" if i % 10 else "", f"r{i % 97}", f"s{i % 13}"]
                + [f"x{rng.randrange(40)}" for _ in range(3)]
            ),
        )
        for i in range(2300)
    ]
    pg = storage.workspace_index(KairoxConfig(), "w")
    lite = WorkspaceRagIndex.from_config(KairoxConfig(), tmp_path / "kx.db", "w")
    for index in (pg, lite):
        index.add_documents(docs, batch_size=500)
    many = " ".join(f"x{i}" for i in range(30))  # a long prompt (MAX_TERMS: past 4096 rows)
    for query in ("common", "common often", "common r5", "often s3 r7", many, "often " + many):
        want = [(h.doc_id, h.score) for h in lite.search(query, 10, "keyword")]
        got = [(h.doc_id, h.score) for h in pg.search(query, 10, "keyword")]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9), query
    # both in more than half the chunks: weightless; the rarer one alone is read
    assert pg.keyword_terms("common often") == {"often": 1}
    assert lite._keyword_terms("common often") == ["often"]
    got = [h.score for h in pg.search("common often", 5, "keyword")]
    assert got and got == pytest.approx([h.score for h in lite.search("often", 5, "keyword")])
    lite.close()
