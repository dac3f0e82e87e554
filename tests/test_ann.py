"""The ANN graph of a large space (retrieval/ann.py): it finds what the exact vec0 scan
finds, it is a cache of SQLite (persisted, caught up from the vector log, rebuilt when
missing, stale or unreadable), and another process's writes reach it."""

from __future__ import annotations

import math
import random
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core.retrieval import ann
from kairox_core.retrieval.index import DocumentInput, WorkspaceRagIndex

pytest.importorskip("usearch")

DIM = 24


class TableEmbedding:
    """Each text ``v<i>`` embeds to row ``i`` of a fixed table; a query ``q<i>`` to
    query ``i``. Real vectors, no model: the index and the graph do the rest."""

    name = "table"
    dimension = DIM

    def __init__(self, rows: Sequence[Sequence[float]], queries: Sequence[Sequence[float]]):
        self.rows = [list(r) for r in rows]
        self.queries = [list(q) for q in queries]

    def _one(self, text: str) -> list[float]:
        table = self.rows if text.startswith("v") else self.queries
        return table[int(text[1:].split()[0])]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def clustered(rng: random.Random, n: int, clusters: int, spread: float) -> list[list[float]]:
    """Vectors around ``clusters`` random centres: how real embeddings are spread."""
    centres = [[rng.gauss(0, 1) for _ in range(DIM)] for _ in range(clusters)]
    out = []
    for _ in range(n):
        c = rng.choice(centres)
        v = [x + rng.gauss(0, spread) for x in c]
        norm = math.sqrt(sum(x * x for x in v))
        out.append([x / norm for x in v])
    return out


@pytest.fixture(autouse=True)
def small_spaces(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Graphs from 40 vectors on, so the tests stay small and fast; walked, not scanned
    whole (``EXACT_MAX``), unless a test says otherwise."""
    monkeypatch.setattr(ann, "ANN_MIN", 40)
    monkeypatch.setattr(ann, "EXACT_MAX", 0)
    monkeypatch.delenv("KAIROX_ANN", raising=False)
    yield


def docs(ids: Sequence[int]) -> list[DocumentInput]:
    return [DocumentInput(doc_id=f"d{i}", text=f"v{i} words") for i in ids]


def exact(index: WorkspaceRagIndex, query: str, k: int, monkeypatch: pytest.MonkeyPatch) -> list:
    monkeypatch.setenv("KAIROX_ANN", "0")
    try:
        return index._vector(query, k, "", [], ("", []))
    finally:
        monkeypatch.delenv("KAIROX_ANN")


def graph(index: WorkspaceRagIndex) -> ann.AnnSpace:
    space = index.ann_space()
    assert space is not None
    return space


@pytest.mark.slow
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(60, 400),
    clusters=st.integers(3, 30),
    spread=st.sampled_from([0.2, 0.5, 1.0]),
)
def test_the_graph_finds_what_the_exact_scan_finds(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    n: int,
    clusters: int,
    spread: float,
) -> None:
    """Recall@10 of the graph against vec0's exact KNN is at least 0.95 on average over
    the queries, on clustered random data of any size, spread and seed; the scores
    of what both return are the same cosine similarities, to the graph's f16
    precision (its vectors are half precision; SQLite keeps the f32 ones)."""
    rng = random.Random(seed)
    rows = clustered(rng, n, clusters, spread)
    queries = clustered(rng, 20, clusters, spread)
    db = tmp_path_factory.mktemp("ann") / "kx.db"
    index = WorkspaceRagIndex(db, "w", TableEmbedding(rows, queries))
    index.add_documents(docs(range(n)))
    assert index.build_ann(threads=1)  # one thread: the same graph every run (deterministic)
    recalls = []
    for q in range(len(queries)):
        approx = index._vector(f"q{q}", 10, "", [], ("", []))
        truth = exact(index, f"q{q}", 10, monkeypatch)
        assert graph(index).ready
        truth_docs = {d for _, d, _ in truth}
        recalls.append(len(truth_docs & {d for _, d, _ in approx}) / len(truth_docs))
        scores = {d: s for _, d, s in truth}
        for _, d, s in approx:
            if d in scores:
                assert s == pytest.approx(scores[d], abs=2e-3)
    assert sum(recalls) / len(recalls) >= 0.95
    index.close()


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 10_000), n=st.integers(60, 300), clusters=st.integers(3, 30))
def test_a_graph_up_to_exact_max_is_scanned_whole_and_finds_what_vec0_finds(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    n: int,
    clusters: int,
) -> None:
    """Scanned whole, the graph's vectors give vec0's exact KNN: the same documents (a
    tie at f16 precision may swap the last), with the same scores to f16 precision."""
    monkeypatch.setattr(ann, "EXACT_MAX", 10_000)
    rng = random.Random(seed)
    rows = clustered(rng, n, clusters, 0.5)
    queries = clustered(rng, 10, clusters, 0.5)
    index = WorkspaceRagIndex(
        tmp_path_factory.mktemp("scan") / "kx.db", "w", TableEmbedding(rows, queries)
    )
    index.add_documents(docs(range(n)))
    assert index.build_ann(threads=1)
    index._vector("q0", 10, "", [], ("", []))  # maps the graph
    hnsw = graph(index).graph
    walked: list[bool] = []
    search = hnsw.search
    hnsw.search = lambda *a, exact=False, **kw: (
        walked.append(not exact) or search(*a, exact=exact, **kw)
    )
    for q in range(len(queries)):
        found = index._vector(f"q{q}", 10, "", [], ("", []))
        assert graph(index).ready
        truth = exact(index, f"q{q}", 10, monkeypatch)
        scores = {d: s for _, d, s in truth}
        assert len({d for _, d, _ in found} & set(scores)) >= 9
        for _, d, s in found:
            if d in scores:
                assert s == pytest.approx(scores[d], abs=2e-3)
        if len({d for _, d, _ in found} & set(scores)) == 9:  # only a tie at the cut
            cut = min(scores.values())
            assert min(s for _, _, s in found) == pytest.approx(cut, abs=2e-3)
    assert walked and not any(walked)  # every search scanned the graph whole
    index.close()


def build(db: Path, n: int, seed: int = 1) -> tuple[WorkspaceRagIndex, TableEmbedding]:
    rng = random.Random(seed)
    backend = TableEmbedding(clustered(rng, n + 50, 8, 0.5), clustered(rng, 10, 8, 0.5))
    index = WorkspaceRagIndex(db, "w", backend)
    index.add_documents(docs(range(n)))
    assert index.build_ann(threads=1)
    return index, backend


def top_doc_ids(index: WorkspaceRagIndex, query: str, k: int = 300) -> set[str]:
    return {h.doc_id for h in index.search(query, k, "vector")}


def test_the_graph_is_saved_and_a_new_connection_maps_it(tmp_path: Path) -> None:
    db = tmp_path / "kx.db"
    index, backend = build(db, 120)
    files = list((tmp_path / "kx.db-ann").rglob("*.usearch"))
    assert len(files) == 1
    index.close()
    again = WorkspaceRagIndex(db, "w", backend)
    found = top_doc_ids(again, "q0")
    space = graph(again)
    assert space.ready and space.builds == 0  # read from the file, not rebuilt
    assert found == {f"d{i}" for i in range(120)}
    again.close()


@pytest.mark.parametrize("point_reads", [0, ann.POINT_READS])
def test_writes_after_the_graph_are_caught_up_from_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point_reads: int
) -> None:
    """A second connection (another process's view) adds and deletes documents; the
    first one's graph sees both at its next search, without a rebuild (the 30 new
    vectors read in one ``IN`` query, or one by one by rowid: vec0 scans for ``IN``)."""
    monkeypatch.setattr(ann, "POINT_READS", point_reads)
    db = tmp_path / "kx.db"
    index, backend = build(db, 100)
    assert top_doc_ids(index, "q1") == {f"d{i}" for i in range(100)}
    other = WorkspaceRagIndex(db, "w", backend)
    other.add_documents(docs(range(100, 130)))
    other.delete_many([f"d{i}" for i in range(10)])
    other.close()
    found = top_doc_ids(index, "q1")
    assert found == {f"d{i}" for i in range(10, 130)}
    assert graph(index).builds == 1 and len(graph(index).delta) == 30
    index.close()


def test_a_large_delta_is_merged_into_a_new_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ann, "DELTA_MAX", 20)
    db = tmp_path / "kx.db"
    index, _ = build(db, 100)
    index.add_documents(docs(range(100, 140)))
    index.search("q2", 5, "vector")  # catches up, starts the merge
    graph(index).wait(30)
    assert graph(index).builds == 2 and not graph(index).delta
    assert top_doc_ids(index, "q2") == {f"d{i}" for i in range(140)}
    names = [p.name for p in (tmp_path / "kx.db-ann").rglob("*.usearch")]
    assert len(names) == 1  # the older file was removed
    index.close()


def test_a_missing_or_unreadable_file_is_rebuilt_and_searches_stay_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "kx.db"
    index, backend = build(db, 80)
    want = exact(index, "q3", 10, monkeypatch)
    index.close()
    (path,) = (tmp_path / "kx.db-ann").rglob("*.usearch")
    path.write_bytes(b"not a graph" * 100)
    again = WorkspaceRagIndex(db, "w", backend)
    assert again._vector("q3", 10, "", [], ("", [])) == want  # the exact scan meanwhile
    graph(again).wait(30)
    assert graph(again).ready and graph(again).builds == 1
    again.close()
    path.unlink(missing_ok=True)
    for p in (tmp_path / "kx.db-ann").rglob("*.usearch"):
        p.unlink()
    third = WorkspaceRagIndex(db, "w", backend)
    assert third._vector("q3", 10, "", [], ("", [])) == want
    graph(third).wait(30)
    assert graph(third).ready
    third.close()


def test_a_graph_from_another_database_or_before_a_reset_is_never_used(tmp_path: Path) -> None:
    db = tmp_path / "kx.db"
    index, backend = build(db, 60)
    index.close()
    old = {p.parent.name for p in (tmp_path / "kx.db-ann").rglob("*.usearch")}
    # a new database at the same path: another uuid, so the old folder is never read
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    fresh = WorkspaceRagIndex(db, "w", backend)
    fresh.add_documents(docs(range(50)))
    directory = graph(fresh).directory
    assert directory is not None and directory.name not in old
    fresh.search("q0", 5, "vector")
    graph(fresh).wait(30)
    assert {h.doc_id for h in fresh.search("q0", 100, "vector")} == {f"d{i}" for i in range(50)}
    fresh.close()
    # a rebuild (re-embedding) logs a reset: the graph built before it is dropped
    index, backend = build(tmp_path / "two.db", 60)
    before = graph(index).upto
    index.rebuild()
    (reset,) = index.conn.execute("SELECT max(id) FROM rag_vec_log WHERE op = 2").fetchone()
    assert reset > before
    index.search("q0", 5, "vector")
    graph(index).wait(30)
    assert graph(index).ready and graph(index).upto >= reset
    assert {h.doc_id for h in index.search("q0", 100, "vector")} == {f"d{i}" for i in range(60)}
    index.close()


@pytest.mark.slow
def test_another_process_writing_the_space_is_caught_up(tmp_path: Path) -> None:
    """A real second process adds documents to the database file while this one holds
    the graph: the next search here returns them."""
    db = tmp_path / "kx.db"
    index, backend = build(db, 70)
    rows = backend.rows
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_ann import TableEmbedding, docs
        from kairox_core.retrieval.index import WorkspaceRagIndex
        rows = {rows!r}
        index = WorkspaceRagIndex({str(db)!r}, "w", TableEmbedding(rows, rows[:1]))
        index.add_documents(docs(range(70, 110)))
        index.close()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert top_doc_ids(index, "q4") == {f"d{i}" for i in range(110)}
    assert graph(index).builds == 1
    index.close()


def test_a_graph_whose_file_another_process_merged_away_is_rebuilt_from_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connection B merges its delta into a new file and removes the old one, which A
    still maps; A's own merge then builds from the stored vectors, and finds them all."""
    monkeypatch.setattr(ann, "DELTA_MAX", 10)
    db = tmp_path / "kx.db"
    a, backend = build(db, 60)
    assert top_doc_ids(a, "q5") == {f"d{i}" for i in range(60)}
    b = WorkspaceRagIndex(db, "w", backend)
    b.add_documents(docs(range(60, 80)))
    b.search("q5", 5, "vector")
    graph(b).wait(30)
    assert graph(b).builds == 1  # B merged (its first graph came from A's file)
    assert graph(a)._graph_path(graph(a).upto) is None  # A's file is gone, still mapped
    a.add_documents(docs(range(80, 95)))
    a.search("q5", 5, "vector")
    graph(a).wait(30)
    assert graph(a).builds == 2 and graph(a).upto >= graph(b).upto
    assert top_doc_ids(a, "q5") == {f"d{i}" for i in range(95)}
    b.close()
    a.close()


def test_closing_the_database_frees_its_graphs_at_once(tmp_path: Path) -> None:
    """A database closing its connection drops the connection's spaces and their graphs
    then (store/database.py ``on_close``): before, the next search anywhere in the
    process noticed the dead connection and freed its graph, inside someone's turn."""
    from kairox_core.store.database import Database

    path = tmp_path / "kx.db"
    build(path, 120)[0].close()  # the graph file
    db = Database.open(path)
    rng = random.Random(1)
    backend = TableEmbedding(clustered(rng, 170, 8, 0.5), clustered(rng, 10, 8, 0.5))
    index = WorkspaceRagIndex(db.conn, "w", backend)
    assert top_doc_ids(index, "q0")
    space = graph(index)
    assert space.ready
    conn = db.conn
    db.release()
    assert space.graph is None
    assert not [key for key, (c, _) in ann._spaces.items() if c is conn]
