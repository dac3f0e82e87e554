"""The workspace index on PostgreSQL: the core's retriever contract, spaces, backends."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from kairox_core.config import KairoxConfig
from kairox_core.retrieval.base import WorkspaceRetriever
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.index import DocumentInput, IndexBackendMismatch, WorkspaceRagIndex
from kairox_core.testing.contracts import ContractDoc, RetrieverContract
from kairox_postgres.index import PgWorkspaceIndex
from kairox_postgres.storage import PostgresStorage
from kairox_postgres.testing import PgTestServer


class _Contract(RetrieverContract):
    mode = "hybrid"

    @pytest.fixture(autouse=True)
    def _server(self, pg_server: PgTestServer) -> None:
        self.server = pg_server

    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        storage = PostgresStorage(self.server.fresh_database(), max_connections=2)
        index = PgWorkspaceIndex(storage.db, "contract", HashingEmbedding(384))
        for d in docs:
            index.add_text(d.id, f"{d.title}\n{d.text}", metadata=dict(d.metadata))
        index.close = storage.close  # type: ignore[method-assign]  # the retriever owns it
        return index.as_retriever(mode=self.mode)


class TestKeywordContract(_Contract):
    mode = "keyword"


class TestHybridContract(_Contract):
    empty_for_nonsense = False  # the vector side ranks every chunk


class TestVectorContract(_Contract):
    mode = "vector"
    empty_for_nonsense = False


@pytest.fixture
def storage(pg_url: str) -> Iterator[PostgresStorage]:
    s = PostgresStorage(pg_url, max_connections=2)
    yield s
    s.close()


DOCS = [
    DocumentInput("a", "The launch moved to Thursday after the review.", metadata={"team": "x"}),
    DocumentInput("b", "Deploys use blue-green rollouts on Tuesdays.", path="docs/deploy.md"),
    DocumentInput("c", "Lunch is at noon; the cafeteria serves soup.", doc_type="note"),
]


def test_incremental_writes_filters_and_deletes(storage: PostgresStorage) -> None:
    index = storage.workspace_index(KairoxConfig(), "w")
    assert index.add_documents(DOCS) == ["added", "added", "added"]
    calls = index.embed_calls
    assert index.add_documents(DOCS) == ["unchanged"] * 3 and index.embed_calls == calls
    changed = DocumentInput("a", "The launch moved to Friday.", metadata={"team": "y"})
    assert index.add_documents([changed]) == ["updated"]
    assert [h.doc_id for h in index.search("launch Friday", 3, "keyword")] == ["a"]
    assert index.search("launch", 3, "keyword", {"team": "x"}) == []
    assert [h.doc_id for h in index.search("rollouts", 3, "hybrid", {"path": "docs/*.md"})] == ["b"]
    assert [h.doc_id for h in index.search("soup", 3, "vector", {"doc_type": "note"})] == ["c"]
    hit = index.search("blue-green", 1, "keyword")[0]
    assert hit.metadata["path"] == "docs/deploy.md" and hit.metadata["workspace_id"] == "w"
    assert index.delete_many(["a", "nope"]) == 1 and index.chunk_count() == 2


def test_a_space_embedded_with_another_backend_is_refused_until_rebuilt(
    storage: PostgresStorage,
) -> None:
    storage.workspace_index(KairoxConfig(), "w", backend=HashingEmbedding(64)).add_documents(DOCS)
    other = storage.workspace_index(KairoxConfig(), "w", backend=HashingEmbedding(32))
    with pytest.raises(IndexBackendMismatch, match="dimension 64"):
        other.search("launch", 3, "hybrid")
    assert [h.doc_id for h in other.search("launch", 3, "keyword")] == ["a"]  # no vectors
    assert other.rebuild() == 3
    assert other.search("launch Thursday", 1, "vector")[0].doc_id == "a"


def test_same_top_hits_as_sqlite(storage: PostgresStorage, tmp_path: Path) -> None:
    """The same chunker, backend and fusion: the rankings agree on a small corpus."""
    pg = storage.workspace_index(KairoxConfig(), "w")
    lite = WorkspaceRagIndex.from_config(KairoxConfig(), tmp_path / "kx.db", "w")
    for index in (pg, lite):
        index.add_documents(DOCS)
    for query in ("launch Thursday review", "blue-green rollouts", "cafeteria soup noon"):
        for mode in ("keyword", "vector", "hybrid"):
            assert [h.doc_id for h in pg.search(query, 1, mode)] == [
                h.doc_id for h in lite.search(query, 1, mode)
            ], (query, mode)
    lite.close()


def test_keywords_are_stemmed_like_fts5_porter(storage: PostgresStorage) -> None:
    index = storage.workspace_index(KairoxConfig(), "w")
    index.add_documents([DocumentInput("r", "Rolling out the deployments"), *DOCS])
    # "rolled" ~ "Rolling", "deployment" ~ "deployments"; Porter (not snowball) leaves
    # "Deploys" as "deploi", as FTS5 does
    assert [h.doc_id for h in index.search("deployment rolled", 3, "keyword")] == ["r"]
    assert [h.doc_id for h in index.search("deploys", 3, "keyword")] == ["b"]
    assert "r" in {h.doc_id for h in index.search("the", 5, "keyword")}  # no stop words
