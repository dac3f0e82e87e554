"""Ranking, snippets, filters and query text that looks like query syntax."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers import build
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core.retrieval.base import RetrieverError
from kairox_core.testing.contracts import CONTRACT_DOCS, ContractDoc
from kairox_tantivy.retriever import TantivyRetriever


@pytest.fixture(scope="module")
def contract_kb(tmp_path_factory: pytest.TempPathFactory) -> TantivyRetriever:
    return build(CONTRACT_DOCS, tmp_path_factory.mktemp("contract"))


def test_title_outranks_body_and_boost_is_configurable(tmp_path: Path) -> None:
    docs = [
        ContractDoc("in-body", "Minerals", "A note that mentions granite once."),
        ContractDoc("in-title", "Granite", "An igneous rock with large crystals."),
    ]
    boosted = build(docs, tmp_path / "a")
    assert [h.doc_id for h in boosted.search("granite", 2)] == ["in-title", "in-body"]
    flat = build(docs, tmp_path / "b", title_boost=0.01, title_in_body=False)
    assert flat.search("granite", 2)[0].doc_id == "in-body"
    # the title heads the body (once), so hits read well on their own
    hit = boosted.search("igneous", 1)[0]
    assert hit.text == "Granite\n\nAn igneous rock with large crystals."


def test_snippet_highlights_the_query_words(contract_kb: TantivyRetriever) -> None:
    hit = contract_kb.search("chlorophyll", 1)[0]
    assert "chlorophyll" in hit.metadata["snippet"]
    assert hit.metadata["title"] == "Photosynthesis"
    assert hit.metadata["category"] == "biology"
    assert hit.text == f"{CONTRACT_DOCS[0].title}\n\n{CONTRACT_DOCS[0].text}"


def test_snippet_length_is_bounded(tmp_path: Path) -> None:
    long = ContractDoc("long", "Long", " ".join(["filler words here"] * 200 + ["needle"]))
    hit = build([long], tmp_path, snippet_chars=60).search("needle", 1)[0]
    assert "needle" in hit.metadata["snippet"]
    assert len(hit.metadata["snippet"]) <= 60


def test_filter_with_a_list_of_allowed_values(contract_kb: TantivyRetriever) -> None:
    hits = contract_kb.search("chemical mineral proteins", 5, {"category": ["geology", "physics"]})
    assert hits and {h.doc_id for h in hits} <= {"doc-volcano", "doc-tides", "doc-quartz"}
    assert contract_kb.search("chemical", 5, {"category": []}) == []


def test_filters_do_not_change_scores(contract_kb: TantivyRetriever) -> None:
    plain = {h.doc_id: h.score for h in contract_kb.search("chemical energy", 5)}
    filtered = contract_kb.search("chemical energy", 5, {"category": "biology"})
    for hit in filtered:
        assert hit.score == pytest.approx(plain[hit.doc_id])


def test_filter_on_an_unknown_field_names_the_kb_and_the_fields(
    contract_kb: TantivyRetriever,
) -> None:
    with pytest.raises(RetrieverError) as info:
        contract_kb.search("chemical", 3, {"colour": "green"})
    message = str(info.value)
    assert "'notes'" in message and "colour" in message and "category" in message
    with pytest.raises(RetrieverError):
        contract_kb.search("chemical", 3, {"body": "plants"})


def test_k_zero_and_blank_query(contract_kb: TantivyRetriever) -> None:
    assert asyncio.run(contract_kb.retrieve("chlorophyll", 0)) == []
    assert contract_kb.search("  ?! ", 3) == []


@pytest.mark.parametrize(
    "text",
    [
        'title:"unclosed',
        "a AND",
        "(x",
        "title:",
        "+-",
        "x^",
        "nonexist:abc",
        "*",
        "NOT",
        "magma OR lava AND NOT",
        "field:[a TO b]",
        "moon~2 tides^3",
        "\\",
        "IN [a b]",
    ],
)
def test_query_syntax_in_user_text_never_raises(contract_kb: TantivyRetriever, text: str) -> None:
    contract_kb.search(text, 3)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=80))
def test_any_text_searches_without_error(contract_kb: TantivyRetriever, text: str) -> None:
    hits = contract_kb.search(text, 3)
    assert len(hits) <= 3
