"""User text with FTS5 syntax in it never raises, in the index or a sqlite_fts KB."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core.retrieval.embeddings import HashingEmbedding
from kairox_core.retrieval.fts import fts_match_expression, query_terms
from kairox_core.retrieval.index import WorkspaceRagIndex

NASTY = [
    '"unbalanced',
    "NEAR(a b, 3)",
    "pre*",
    "-excluded",
    "a AND OR NOT b",
    "(((",
    "^start",
    "col:value",
    "}{",
    "'",
    "AND",
    "*",
    'say "hi" NEAR/2 there',
    "a\x00b",
    "emoji 🦀 and ünïcödé",
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> WorkspaceRagIndex:
    db = tmp_path_factory.mktemp("fts") / "kx.db"
    idx = WorkspaceRagIndex(db, "ws", HashingEmbedding(32))
    idx.add_text("a", "near the volcano there is excluded start value and hi")
    return idx


@pytest.mark.parametrize("query", NASTY)
def test_known_syntax_is_plain_text(index: WorkspaceRagIndex, query: str) -> None:
    for mode in ("keyword", "hybrid"):
        index.search(query, 3, mode)


def test_syntax_words_still_match_as_words(index: WorkspaceRagIndex) -> None:
    assert index.search("NEAR(", 1, "keyword")[0].doc_id == "a"
    assert index.search('"excluded', 1, "keyword")[0].doc_id == "a"


@pytest.mark.slow
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=80))
def test_arbitrary_text_never_raises(index: WorkspaceRagIndex, text: str) -> None:
    hits = index.search(text, 3, "keyword")
    assert isinstance(hits, list)


@given(st.text(max_size=200))
def test_expression_quotes_every_term(text: str) -> None:
    expr = fts_match_expression(text)
    terms = query_terms(text)
    if not terms:
        assert expr is None
    else:
        assert expr is not None and expr.count('"') == 2 * len(terms)


@pytest.mark.slow
def test_sqlite_fts_kb_takes_arbitrary_text(tmp_path: Path) -> None:
    from kairox_core.retrieval.sqlite_fts import SqliteFtsOptions, SqliteFtsRetriever
    from kairox_core.store.connection import connect

    db = tmp_path / "kb.db"
    conn = connect(db, vec=False)
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(id UNINDEXED, body)")
    conn.execute("INSERT INTO docs(id, body) VALUES ('1', 'near star value')")
    conn.close()
    kb = SqliteFtsRetriever(
        "kb", SqliteFtsOptions(path=str(db), table="docs", text_columns=("body",))
    )

    @settings(max_examples=200, deadline=None)
    @given(st.one_of(st.sampled_from(NASTY), st.text(max_size=60)))
    def check(text: str) -> None:
        kb.search(text, 3)

    check()
    assert kb.search("NEAR*", 1)[0].doc_id == "1"
