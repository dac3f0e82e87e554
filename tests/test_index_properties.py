"""Property: after any sequence of adds, edits and deletes the index equals a dict model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.index import WorkspaceRagIndex

pytestmark = pytest.mark.slow

WORDS = ["apple", "river", "stone", "cloud", "ember", "frost", "maple", "orbit"]
ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "delete"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
        st.sampled_from(["text", "conversation"]),
    ),
    max_size=14,
)


@settings(max_examples=40, deadline=None)
@given(ops)
def test_index_matches_a_model(operations: list[tuple[str, str, str, str]]) -> None:
    index = WorkspaceRagIndex(":memory:", "ws", HashingEmbedding(32))
    model: dict[str, tuple[str, str]] = {}
    for op, doc_id, text, doc_type in operations:
        if op == "add":
            status = index.add_text(doc_id, text, doc_type=doc_type)
            expected = (
                "unchanged"
                if model.get(doc_id, ("", ""))[0] == text
                else "updated"
                if doc_id in model
                else "added"
            )
            assert status == expected
            model[doc_id] = (text, doc_type)
        else:
            assert index.delete(doc_id) == (doc_id in model)
            model.pop(doc_id, None)
    assert {d.doc_id: d.doc_type for d in index.documents()} == {k: v[1] for k, v in model.items()}
    for word in WORDS:
        want = {k for k, (text, _) in model.items() if word in text.split()}
        assert {h.doc_id for h in index.search(word, 10, "keyword")} == want
        for doc_type in ("text", "conversation"):
            typed = {k for k in want if model[k][1] == doc_type}
            for mode in ("keyword", "hybrid"):
                got = {h.doc_id for h in index.search(word, 10, mode, {"doc_type": doc_type})}
                assert typed <= got and got <= {k for k, v in model.items() if v[1] == doc_type}
    if any(op == "add" for op, *_ in operations):  # the vector table exists once written
        vectors = index.conn.execute("SELECT count(*) FROM rag_vec_32").fetchone()[0]
        assert vectors == index.chunk_count() == len(model)
