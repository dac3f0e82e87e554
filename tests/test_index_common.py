"""The index helpers both indexes share (SQLite and PostgreSQL), and Fts5Terms cuts text
into the terms FTS5 itself indexes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.retrieval import index_common as common
from kairox_core.retrieval.chunking import Chunker, content_hash
from kairox_core.retrieval.fts5_terms import Fts5Terms, bm25, bm25_idf, select_terms
from kairox_core.retrieval.index import DocumentInput, WorkspaceRagIndex
from kairox_core.retrieval.keyword_terms import CHEAP_ROWS, WEIGHTLESS_ROWS

texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=80)


@pytest.mark.slow
@settings(deadline=None)
@given(title=texts, text=texts, context=texts)
def test_doc_hash_and_context_hash_keep_the_stored_format(
    title: str, text: str, context: str
) -> None:
    """The hashes databases already hold: a change would re-embed every document."""
    extra = f"\x00context\x00{context}" if context else ""
    assert common.doc_hash(title, text, context) == content_hash(f"{title}\x00{text}{extra}")
    for chunk in Chunker(64, 8).chunk(text or "x"):
        got = common.with_context(chunk, context)
        want = content_hash(f"{chunk.content_hash}\x00{context}") if context else chunk.content_hash
        assert got == replace(chunk, content_hash=want)


def test_statuses_fusion_and_vectors() -> None:
    batch = [DocumentInput("a", "x"), DocumentInput("b", "y"), DocumentInput("a", "z")]
    stored = {"b": common.doc_hash("", "y")}
    assert common.statuses(batch, stored) == ["added", "unchanged", "updated"]
    assert [d.text for d in common.last_per_doc_id(batch)] == ["y", "z"]
    lists = [(1.0, [(1, 10, 0.5), (2, 20, 0.4)]), (0.7, [(3, 20, 0.9), (4, 30, 0.1)])]
    assert common.fuse_rankings(lists, rrf_k=5) == [
        (2, 20, 1 / 7 + 0.7 / 6),
        (1, 10, 1 / 6),
        (4, 30, 0.7 / 7),
    ]
    vectors = [[3.0, 4.0], [0.0, 2.0]]
    assert common.mean_vector(vectors) == pytest.approx([0.6 / 3.6**0.5, 1.8 / 3.6**0.5])
    items = [("text", "Heading", ""), ("reply", "", "the question")]
    assert common.embed_texts(items) == ["Heading\ntext", "reply", "the question\nreply"]
    mixed = common.chunk_vectors(items, [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert mixed[0] == [1.0, 0.0] and mixed[1] == common.mean_vector([[0, 1], [1, 0]])


def test_collapse_over_fetches_until_k_documents() -> None:
    ranked = [(i, i // 5, 1.0 - i / 100) for i in range(60)]  # 5 chunks per document
    asked: list[int] = []

    def fetch(limit: int) -> common.Ranked:
        asked.append(limit)
        return ranked[:limit]

    assert [doc for _, doc, _ in common.collapse(fetch, 4)] == [0, 1, 2, 3]
    assert asked == [12, 48]
    assert len(common.collapse(fetch, 20)) == 12  # the chunks ran out
    asked.clear()
    assert [doc for _, doc, _ in common.collapse(fetch, 20, max_limit=12)] == [0, 1, 2]
    assert asked == [12]  # never past max_limit


def test_fts5_terms_are_the_terms_fts5_indexes() -> None:
    terms = Fts5Terms()
    counts = terms.chunks([("Rolling out the deployments, naïve café café", "Intro")])[0]
    assert counts.frequencies == {
        "roll": 1,
        "out": 1,
        "the": 1,
        "deploy": 1,
        "naiv": 1,
        "cafe": 2,
        "intro": 1,
    }
    assert counts.length == 8 + 1  # and the workspace's token, as rag_fts counts a row
    assert terms.words(["deploys", "foo_bar", "_"]) == [("deploi",), ("foo", "bar"), ()]
    # the same scores as FTS5's bm25 on the SQLite index
    index = WorkspaceRagIndex(":memory:", "w")
    docs = ["launch review launch", "launch soup", "soup noon cafeteria", "review"]
    index.add_documents([DocumentInput(f"d{i}", t) for i, t in enumerate(docs)])
    rows = terms.chunks([(t, "") for t in docs])
    avg = sum(r.length for r in rows) / len(rows)
    df = sum(1 for r in rows if "launch" in r.frequencies)
    want = {h.doc_id: h.score for h in index.search("launch", 4, "keyword")}
    for i, r in enumerate(rows):
        if "launch" in r.frequencies:
            got = bm25(r.frequencies["launch"], r.length, avg, bm25_idf(len(rows), df))
            assert abs(got - want[f"d{i}"]) < 1e-9
    index.close()


def test_select_terms_keeps_cheap_words_and_drops_weightless_ones() -> None:
    words = ["rare", "half", "most"]
    stems = [("rare",), ("half",), ("most",)]
    rows = 10 * CHEAP_ROWS
    df = {"rare": 3, "half": rows // 2, "most": rows - 1}
    assert select_terms(words, stems, df, rows) == [0]
    assert select_terms(["most"], [("most",)], df, rows) == [0]  # a lone word is kept
    # every word weightless: the rarest is kept, its bm25 still orders the rows
    assert select_terms(["most", "half"], [("most",), ("half",)], df, rows) == [1]
    assert select_terms(words, stems, df, 0) == [0, 1, 2]


def test_a_weightless_word_is_dropped_from_a_mid_sized_index_but_not_a_tiny_one() -> None:
    """Under ``CHEAP_ROWS`` rows every doclist is short, yet a word in half the rows or
    more ranks nothing: dropped once it is in more than ``WEIGHTLESS_ROWS`` rows; at or
    below that (a tiny index) every word is searched; a split word is a phrase, kept."""
    rows = 1_000
    words = ["rare", "the", "most", "foo_bar"]
    stems = [("rare",), ("the",), ("most",), ("foo", "bar")]
    df = {"rare": 4, "the": 900, "most": 500, "foo": 900, "bar": 900}
    assert WEIGHTLESS_ROWS < 500 < CHEAP_ROWS
    assert select_terms(words, stems, df, rows) == [0, 3]
    tiny = {"rare": 1, "the": WEIGHTLESS_ROWS, "most": WEIGHTLESS_ROWS, "foo": 1, "bar": 1}
    assert select_terms(words, stems, tiny, WEIGHTLESS_ROWS + 10) == [0, 1, 2, 3]
