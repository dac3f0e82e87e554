"""The sqlite_fts knowledge-base kind: contract, configuration errors, building."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from kairox_core.config import KnowledgeBaseConfig
from kairox_core.errors import ConfigError
from kairox_core.plugins import get_plugins
from kairox_core.retrieval.base import (
    IndexableRetriever,
    RetrieverConfigError,
    RetrieverError,
    WorkspaceRetriever,
)
from kairox_core.retrieval.sqlite_fts import SqliteFtsRetriever
from kairox_core.store.connection import connect
from kairox_core.testing.contracts import (
    ContractDoc,
    IndexableRetrieverContract,
    RetrieverContract,
)


def kb_config(db: Path, **options: object) -> KnowledgeBaseConfig:
    return KnowledgeBaseConfig.model_validate(
        {"id": "papers", "kind": "sqlite_fts", "path": str(db), **options}
    )


def make(db: Path, **options: object) -> WorkspaceRetriever:
    reg = get_plugins().get("retrievers", "sqlite_fts")
    retriever: WorkspaceRetriever = reg.factory(kb_config(db, **options))
    return retriever


class TestPlainTableContract(RetrieverContract):
    """An ordinary table; ``index([])`` builds its FTS5 index (``kairox kb index ID``)."""

    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        db = tmp_path / "plain.db"
        db.unlink(missing_ok=True)
        conn = connect(db, vec=False)
        conn.execute(
            "CREATE TABLE papers (pid TEXT PRIMARY KEY, title TEXT, body TEXT, category TEXT)"
        )
        conn.executemany(
            "INSERT INTO papers VALUES (?, ?, ?, ?)",
            [(d.id, d.title, d.text, d.metadata["category"]) for d in docs],
        )
        conn.close()
        retriever = make(
            db,
            table="papers",
            text_columns=["body"],
            id_column="pid",
            title_column="title",
            metadata_columns=["category"],
        )
        assert isinstance(retriever, IndexableRetriever)
        retriever.index([])
        return retriever


class TestFts5TableContract(RetrieverContract):
    """A table that is itself FTS5."""

    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        db = tmp_path / "fts.db"
        db.unlink(missing_ok=True)
        conn = connect(db, vec=False)
        conn.execute(
            "CREATE VIRTUAL TABLE notes USING fts5(id UNINDEXED, title, text, category UNINDEXED)"
        )
        conn.executemany(
            "INSERT INTO notes VALUES (?, ?, ?, ?)",
            [(d.id, d.title, d.text, d.metadata["category"]) for d in docs],
        )
        conn.close()
        return make(
            db,
            table="notes",
            text_columns="text",
            title_column="title",
            metadata_columns=["category"],
        )


def _search(
    retriever: WorkspaceRetriever, query: str, k: int = 5, filters: dict[str, object] | None = None
) -> list[str]:
    return [h.doc_id for h in asyncio.run(retriever.retrieve(query, k, filters))]


def test_missing_file_names_the_knowledge_base(tmp_path: Path) -> None:
    retriever = make(tmp_path / "nope.db")
    with pytest.raises(RetrieverConfigError) as info:
        _search(retriever, "x")
    assert "knowledge base 'papers'" in str(info.value) and "nope.db" in str(info.value)
    assert not (tmp_path / "nope.db").exists()  # searching never creates the file


def test_missing_table_or_column_or_index(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    conn = connect(db, vec=False)
    conn.execute("CREATE TABLE documents (id TEXT, text TEXT)")
    conn.close()
    with pytest.raises(RetrieverConfigError, match="table 'missing' not found"):
        _search(make(db, table="missing"), "x")
    with pytest.raises(RetrieverConfigError, match=r"no column.*body"):
        _search(make(db, text_columns=["body"]), "x")
    with pytest.raises(RetrieverConfigError, match="kairox kb index papers"):
        _search(make(db), "x")


def test_bad_options_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"knowledge_bases\.papers\.tabel.*did you mean 'table'"):
        make(tmp_path / "x.db", tabel="docs")
    with pytest.raises(ConfigError, match=r"knowledge_bases\.papers\.table.*identifier"):
        make(tmp_path / "x.db", table="docs; DROP TABLE x")


def test_unknown_filter_is_a_retriever_error(tmp_path: Path) -> None:
    retriever = TestFts5TableContract().make_retriever(
        [ContractDoc("a", "A", "alpha text", {"category": "x"})], tmp_path
    )
    with pytest.raises(RetrieverError, match="cannot filter on 'colour'"):
        _search(retriever, "alpha", filters={"colour": "red"})
    assert _search(retriever, "alpha", filters={"category": ["x", "y"]}) == ["a"]


def test_kb_index_builds_and_refreshes_from_files(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\nphotosynthesis in leaves")
    (docs / "b.txt").write_text("volcano and lava")
    (docs / "blob.bin").write_bytes(b"\x00\x01binary")
    (docs / ".gitignore").write_text("ignored.md\n")
    (docs / "ignored.md").write_text("photosynthesis secret")
    db = tmp_path / "kb.db"
    retriever = make(db, title_column="title")
    assert isinstance(retriever, SqliteFtsRetriever)
    report = retriever.index([str(docs)])
    assert (report.added, report.updated, report.unchanged, report.removed) == (2, 0, 0, 0)
    assert report.skipped_binary == 1
    assert _search(retriever, "photosynthesis") == [str((docs / "a.md").resolve())]
    (docs / "b.txt").unlink()
    (docs / "a.md").write_text("# Alpha\nchlorophyll only now, much longer text")
    (docs / "c.md").write_text("tides")
    asyncio.run(retriever.close())
    report = retriever.index([str(docs)])
    assert (report.added, report.updated, report.unchanged, report.removed) == (1, 1, 0, 1)
    assert _search(retriever, "volcano") == []
    assert _search(retriever, "chlorophyll") == [str((docs / "a.md").resolve())]
    assert retriever.index([str(docs)]).unchanged == 2


class TestSqliteFtsIndexable(IndexableRetrieverContract):
    def make_indexable_retriever(self, tmp_path: Path) -> WorkspaceRetriever:
        return make(tmp_path / "built.db", title_column="title")
