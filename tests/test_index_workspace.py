"""WorkspaceRagIndex: incremental indexing, search modes, filters, isolation, backends."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kairox_core.retrieval.base import RetrieverError, WorkspaceRetriever
from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.index import IndexBackendMismatch, WorkspaceRagIndex
from kairox_core.store.connection import connect
from kairox_core.testing.contracts import ContractDoc, RetrieverContract


class CountingBackend(HashingEmbedding):
    """The hashing backend, counting what it is asked to embed."""

    def __init__(self, dimension: int = 64, name: str = "hashing") -> None:
        super().__init__(dimension)
        self.name = name
        self.calls = 0
        self.texts = 0

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.texts += len(texts)
        return super().embed_documents(texts)


def _index_docs(docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRagIndex:
    index = WorkspaceRagIndex(tmp_path / "kx.db", "contract", CountingBackend(384))
    for d in docs:
        index.add_text(d.id, f"{d.title}\n{d.text}", metadata=dict(d.metadata))
    return index


class TestWorkspaceKeywordContract(RetrieverContract):
    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        return _index_docs(docs, tmp_path).as_retriever(mode="keyword")


class TestWorkspaceHybridContract(RetrieverContract):
    empty_for_nonsense = False  # the vector side ranks every chunk

    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        return _index_docs(docs, tmp_path).as_retriever()


class TestWorkspaceVectorContract(TestWorkspaceHybridContract):
    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        return _index_docs(docs, tmp_path).as_retriever(mode="vector")


@pytest.fixture
def index(tmp_path: Path) -> WorkspaceRagIndex:
    return WorkspaceRagIndex(
        tmp_path / "kx.db", "ws", CountingBackend(), chunk_tokens=64, chunk_overlap=8
    )


LONG = "\n\n".join(f"## Part {i}\n" + " ".join([f"topic{i} words here."] * 12) for i in range(6))


def test_reindexing_unchanged_text_embeds_nothing(index: WorkspaceRagIndex) -> None:
    backend = index.backend
    assert isinstance(backend, CountingBackend)
    assert index.add_text("doc", LONG) == "added"
    calls, texts = backend.calls, backend.texts
    assert texts >= 3
    assert index.add_text("doc", LONG) == "unchanged"
    assert (backend.calls, backend.texts) == (calls, texts)


def test_an_edit_reembeds_only_changed_chunks(index: WorkspaceRagIndex) -> None:
    backend = index.backend
    assert isinstance(backend, CountingBackend)
    index.add_text("doc", LONG)
    n_chunks = index.chunk_count()
    before = backend.texts
    edited = LONG.replace("topic5 words here.", "topic5 other words.", 1)
    assert index.add_text("doc", edited) == "updated"
    assert 1 <= backend.texts - before < n_chunks
    assert index.search("other", 3, "keyword")[0].doc_id == "doc"


def test_unchanged_file_is_not_even_read(index: WorkspaceRagIndex, tmp_path: Path) -> None:
    f = tmp_path / "notes.md"
    f.write_text(LONG)
    assert index.add_file(f) == "added"
    assert index.add_file(f) == "unchanged"
    hit = index.search("topic3", 1, "keyword")[0]
    assert hit.doc_id == str(f.resolve()) and hit.metadata["doc_type"] == "markdown"
    assert hit.metadata["heading"] == "Part 3" and hit.source == "workspace"


def test_delete_removes_from_every_mode(index: WorkspaceRagIndex) -> None:
    index.add_text("a", "volcano lava magma")
    index.add_text("b", "tides and the moon")
    assert index.delete("a") and not index.delete("a")
    for mode in ("keyword", "vector", "hybrid"):
        assert all(h.doc_id != "a" for h in index.search("volcano lava", 5, mode))
    conn = index.conn
    assert conn.execute("SELECT count(*) FROM rag_vec_64").fetchone()[0] == 1
    assert (
        conn.execute("SELECT count(*) FROM rag_fts WHERE rag_fts MATCH 'volcano'").fetchone()[0]
        == 0
    )


def test_workspaces_never_see_each_other(tmp_path: Path) -> None:
    conn = connect(tmp_path / "kx.db")
    a = WorkspaceRagIndex(conn, "alpha", CountingBackend())
    b = WorkspaceRagIndex(conn, "beta", CountingBackend())
    a.add_text("secret", "the alpha launch codes are pineapple")
    b.add_text("public", "beta notes about apples")
    for mode in ("keyword", "vector", "hybrid"):
        assert {h.doc_id for h in b.search("alpha launch codes pineapple", 5, mode)} <= {"public"}
        assert {h.doc_id for h in a.search("beta apples", 5, mode)} <= {"secret"}
    assert a.search("pineapple", 1, "keyword")[0].metadata["workspace_id"] == "alpha"


def test_filters_on_path_doc_type_and_metadata(index: WorkspaceRagIndex) -> None:
    index.add_text(
        "/repo/docs/a.md", "retrieval design notes", doc_type="markdown", path="/repo/docs/a.md"
    )
    index.add_text("/repo/src/b.py", "retrieval code", doc_type="code", path="/repo/src/b.py")
    for seq in range(3):
        index.add_text(
            f"turn-{seq}",
            f"we discussed retrieval in turn {seq}",
            doc_type="conversation",
            metadata={"session_id": "s1", "seq": seq},
        )
    index.add_text(
        "turn-x",
        "retrieval in another session",
        doc_type="conversation",
        metadata={"session_id": "s2", "seq": 0},
    )
    for mode in ("keyword", "vector", "hybrid"):

        def ids(filters: dict[str, Any], mode: str = mode) -> set[str]:
            return {h.doc_id for h in index.search("retrieval", 10, mode, filters)}

        assert ids({"path": "*.md"}) == {"/repo/docs/a.md"}
        assert ids({"path": ["/repo/src/*", "*.md"]}) == {"/repo/docs/a.md", "/repo/src/b.py"}
        assert ids({"doc_type": "code"}) == {"/repo/src/b.py"}
        assert ids({"doc_type": "conversation", "session_id": "s1"}) == {
            "turn-0",
            "turn-1",
            "turn-2",
        }
        assert ids({"session_id": "s1", "seq": [0, 2]}) == {"turn-0", "turn-2"}
    hit = index.search("retrieval", 1, "keyword", {"session_id": "s2"})[0]
    assert hit.metadata["session_id"] == "s2" and hit.metadata["seq"] == 0


def test_bad_filter_key_is_a_retriever_error(index: WorkspaceRagIndex) -> None:
    index.add_text("a", "text")
    with pytest.raises(RetrieverError, match="cannot filter"):
        index.search("text", 1, "keyword", {"bad key'": 1})


def test_metadata_change_alone_reembeds_nothing(index: WorkspaceRagIndex) -> None:
    backend = index.backend
    assert isinstance(backend, CountingBackend)
    index.add_text("t", "hello there", metadata={"seq": 1})
    before = backend.texts
    assert index.add_text("t", "hello there", metadata={"seq": 2}) == "unchanged"
    assert backend.texts == before
    assert index.search("hello", 1, "vector", {"seq": 2})[0].doc_id == "t"


def test_other_backend_is_refused_until_rebuild(tmp_path: Path) -> None:
    db = tmp_path / "kx.db"
    WorkspaceRagIndex(db, "ws", CountingBackend(64)).add_text("a", "moon and tides")
    other = WorkspaceRagIndex(db, "ws", CountingBackend(32, name="other"))
    with pytest.raises(IndexBackendMismatch, match="kairox index --rebuild"):
        other.search("moon", 3, "vector")
    with pytest.raises(IndexBackendMismatch):
        other.add_text("b", "more")
    assert other.search("moon", 3, "keyword")[0].doc_id == "a"  # no vectors involved
    assert other.rebuild() == 1
    assert other.recorded_backend() == ("other", 32)
    assert other.search("moon", 3, "hybrid")[0].doc_id == "a"
    with pytest.raises(IndexBackendMismatch, match="'other' \\(dimension 32\\)"):
        WorkspaceRagIndex(db, "ws", CountingBackend(64)).search("moon", 3)


def test_a_crash_mid_batch_writes_nothing(
    index: WorkspaceRagIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kairox_core.retrieval.index import DocumentInput

    index.add_text("keep", "original text")
    real = WorkspaceRagIndex._write
    calls = {"n": 0}

    def flaky(self: WorkspaceRagIndex, *args: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("power cut")
        real(self, *args)

    monkeypatch.setattr(WorkspaceRagIndex, "_write", flaky)
    with pytest.raises(RuntimeError):
        index.add_documents([DocumentInput("keep", "changed text"), DocumentInput("new", "x")])
    monkeypatch.undo()
    assert [d.doc_id for d in index.documents()] == ["keep"]
    assert index.search("original", 1, "keyword")[0].doc_id == "keep"
    assert index.search("changed", 1, "keyword") == []


def test_hits_collapse_to_one_per_document(index: WorkspaceRagIndex) -> None:
    index.add_text("long", LONG)
    index.add_text("short", "topic1 words here.")
    for mode in ("keyword", "vector", "hybrid"):
        hits = index.search("topic1 words here", 5, mode)
        assert len({h.doc_id for h in hits}) == len(hits) == 2


def test_unknown_mode_is_a_user_error(index: WorkspaceRagIndex) -> None:
    from kairox_core.errors import KairoxUserError

    with pytest.raises(KairoxUserError, match="unknown search mode"):
        index.search("x", 1, "fuzzy")


async def test_an_empty_space_answers_on_the_loop_and_a_busy_one_waits_its_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workspace with no files (a chat's default) is known empty on the event loop, no
    thread hop; a space with chunks is searched in a thread; and while another thread
    holds the connection, the probe does not wait on the loop: it searches in a thread."""
    import threading

    import kairox_core.retrieval.threads as threads

    hops: list[object] = []
    real = threads.run_blocking

    async def counted(fn: Any, *args: Any, **kw: Any) -> Any:
        hops.append(fn)
        return await real(fn, *args, **kw)

    monkeypatch.setattr(threads, "run_blocking", counted)
    index = WorkspaceRagIndex(tmp_path / "kx.db", "ws", HashingEmbedding(32))
    retriever = index.as_retriever()
    assert await retriever.retrieve("the release date", 3) == [] and hops == []
    index.add_text("notes", "The release date is Friday.")
    assert [h.doc_id for h in await retriever.retrieve("release date", 3)] == ["notes"]
    assert len(hops) == 1
    other = WorkspaceRagIndex(tmp_path / "kx.db", "empty", HashingEmbedding(32))
    held, go = threading.Event(), threading.Event()

    def hold() -> None:
        with other.lock:
            held.set()
            go.wait(5)

    worker = threading.Thread(target=hold)
    worker.start()
    held.wait(5)
    assert other.surely_empty() is False  # busy: no waiting on the loop
    go.set()
    worker.join()
    assert other.surely_empty() is True
    other.close()
    index.close()
