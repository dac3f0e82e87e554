"""WorkspaceRagIndex.add_documents: a doc id twice in one batch, and a row written by
another connection (another process) between the plan and the write (issue 13)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.index import DocumentInput, WorkspaceRagIndex


def doc(doc_id: str, text: str) -> DocumentInput:
    return DocumentInput(doc_id=doc_id, text=text, doc_type="note")


def test_a_doc_id_twice_in_one_batch_keeps_the_batch_and_the_last_text(tmp_path: Path) -> None:
    index = WorkspaceRagIndex(tmp_path / "kx.db", "w", HashingEmbedding(64))
    statuses = index.add_documents(
        [doc("a", "apples in autumn"), doc("b", "bananas"), doc("a", "avocados in April")]
    )
    assert statuses == ["added", "added", "updated"]
    assert sorted(d.doc_id for d in index.documents()) == ["a", "b"]
    assert [h.doc_id for h in index.search("avocados", 3, "keyword")] == ["a"]
    assert index.search("apples", 3, "keyword") == []
    assert index.add_documents([doc("a", "avocados in April"), doc("a", "avocados in April")]) == [
        "unchanged",
        "unchanged",
    ]


@pytest.mark.parametrize("same_text", [True, False])
def test_a_row_added_by_another_process_meanwhile_is_upserted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_text: bool
) -> None:
    db = tmp_path / "kx.db"
    ours = WorkspaceRagIndex(db, "w", HashingEmbedding(64))
    theirs = WorkspaceRagIndex(db, "w", HashingEmbedding(64))  # its own connection
    embed = ours._embed

    def racing(items: Any) -> Any:  # the other process writes while we embed
        theirs.add_documents([doc("turn:1", "the same turn" if same_text else "older text")])
        return embed(items)

    monkeypatch.setattr(ours, "_embed", racing)
    assert ours.add_documents([doc("turn:1", "the same turn")]) == ["added"]
    assert [d.doc_id for d in ours.documents()] == ["turn:1"]
    assert ours.chunk_count() == 1
    assert [h.doc_id for h in ours.search("same turn", 3, "keyword")] == ["turn:1"]
