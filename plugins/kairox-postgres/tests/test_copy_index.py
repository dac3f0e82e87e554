"""`kairox db copy` moves the workspace index both ways: same results, nothing re-embedded."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox_core.config import KairoxConfig
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.index import DocumentInput, WorkspaceRagIndex
from kairox_core.store.sqlite_storage import SqliteStorage
from kairox_postgres.copy import CopyError, copy_database
from kairox_postgres.storage import PostgresStorage
from kairox_postgres.testing import PgTestServer

DOCS = [
    DocumentInput("a", "The launch moved to Thursday after the review.", metadata={"team": "x"}),
    DocumentInput("b", "# Deploys\n\nBlue-green rollouts on Tuesdays.", path="docs/deploy.md"),
    DocumentInput("c", "Lunch is at noon; the cafeteria serves soup.", doc_type="note"),
    DocumentInput("t2", "Yes, last May!", context="When did the launch slip?"),
    *[DocumentInput(f"n{i}", f"note {i}: launch review soup rollout {i % 7}") for i in range(40)],
]
QUERIES = ["launch Thursday review", "blue-green rollouts", "soup", "when did it slip", "note 3"]


def _results(index: object) -> list[object]:
    out = []
    for query in QUERIES:
        for mode in ("keyword", "vector", "hybrid"):
            hits = index.search(query, 5, mode)  # type: ignore[attr-defined]
            out.append([(h.doc_id, round(h.score, 6), h.metadata["path"]) for h in hits])
    return out


def test_index_copies_to_postgres_and_back(tmp_path: Path, pg_server: PgTestServer) -> None:
    backend = HashingEmbedding(128)
    source = tmp_path / "mine.db"
    lite = SqliteStorage(str(source))
    contents = (("w", DOCS), ("recall:s1", DOCS[:3]))
    for space, docs in contents:
        WorkspaceRagIndex.from_config(KairoxConfig(), lite.db.conn, space, backend).add_documents(
            docs
        )
    spaces = {
        space: _results(WorkspaceRagIndex.from_config(KairoxConfig(), lite.db.conn, space, backend))
        for space, _ in contents
    }
    lite.close()
    # bm25 statistics: FTS5's are the whole table's, PostgreSQL's each space's own, so
    # PostgreSQL ranks as a SQLite file holding that space alone
    alone = {}
    for space, docs in contents:
        index = WorkspaceRagIndex(tmp_path / f"{space}.db", space, backend)
        index.add_documents(docs)
        alone[space] = _results(index)
        index.close()

    url = pg_server.fresh_database()
    report = copy_database(str(source), url)
    assert report.copied["rag_spaces"] == 2
    assert report.copied["rag_documents"] == len(DOCS) + 3
    assert "rag_chunks" not in report.not_copied
    pg = PostgresStorage(url, max_connections=2)
    try:
        for space in spaces:
            index = pg.workspace_index(KairoxConfig(), space, backend=backend)
            assert _results(index) == alone[space], space
            docs = dict(contents)[space]
            assert index.add_documents(docs) == ["unchanged"] * len(docs)
            assert index.embed_calls == 0  # the copied vectors and hashes are reused
        w = pg.workspace_index(KairoxConfig(), "w", backend=backend)
        w.add_text("new", "a launch added after the copy")  # ids go on after the copied ones
        assert w.search("added after the copy", 1, "keyword")[0].doc_id == "new"
        w.delete_many(["new"])
    finally:
        pg.close()

    back = tmp_path / "back.db"
    report = copy_database(url, str(back))
    assert report.copied["rag_chunks"] > len(DOCS)
    again = SqliteStorage(str(back))
    try:
        for space, want in spaces.items():
            index = WorkspaceRagIndex.from_config(KairoxConfig(), again.db.conn, space, backend)
            assert _results(index) == want, space
            assert index.add_documents(DOCS[:3]) == ["unchanged"] * 3 and index.embed_calls == 0
    finally:
        again.close()
    with pytest.raises(CopyError, match="indexed documents"):
        copy_database(str(source), str(back))
