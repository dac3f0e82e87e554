"""Configuration and index problems give errors naming the knowledge base and the fix."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers import build, kb_config

from kairox_core.config import check_plugin_names, parse_config
from kairox_core.errors import ConfigError
from kairox_core.retrieval.base import RetrieverConfigError
from kairox_core.testing.contracts import CONTRACT_DOCS
from kairox_tantivy.retriever import TantivyRetriever


def test_missing_index_directory(tmp_path: Path) -> None:
    retriever = TantivyRetriever(kb_config("papers", path=str(tmp_path / "nowhere")))
    with pytest.raises(RetrieverConfigError) as info:
        asyncio.run(retriever.retrieve("x", 3))
    message = str(info.value)
    assert "knowledge base 'papers'" in message
    assert "does not exist" in message and "kairox kb index papers" in message


def test_directory_without_an_index(tmp_path: Path) -> None:
    retriever = TantivyRetriever(kb_config("papers", path=str(tmp_path)))
    with pytest.raises(RetrieverConfigError, match="holds no Tantivy index"):
        retriever.search("x", 3)


def test_corrupt_index(tmp_path: Path) -> None:
    build(CONTRACT_DOCS, tmp_path)
    (tmp_path / "index" / "meta.json").write_text("{ not json")
    retriever = TantivyRetriever(kb_config("papers", path=str(tmp_path / "index")))
    with pytest.raises(RetrieverConfigError) as info:
        retriever.search("magma", 3)
    assert "'papers'" in str(info.value) and "corrupt" in str(info.value)


def test_stored_field_missing_from_an_existing_index(tmp_path: Path) -> None:
    build(CONTRACT_DOCS, tmp_path)
    retriever = TantivyRetriever(
        kb_config("papers", path=str(tmp_path / "index"), stored_fields=["category", "year"])
    )
    with pytest.raises(RetrieverConfigError, match=r"year .*rebuild"):
        retriever.search("magma", 3)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({}, "missing required key 'knowledge_bases.papers.path'"),
        ({"path": "x", "title_bost": 3}, "did you mean 'title_boost'?"),
        ({"path": "x", "title_boost": -1}, "key 'knowledge_bases.papers.title_boost'"),
        ({"path": "x", "stored_fields": ["title"]}, "built in"),
    ],
)
def test_bad_options_are_reported_at_once(options: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        TantivyRetriever(kb_config("papers", **options))
    assert "knowledge_bases.papers" in str(info.value) and fragment in str(info.value)


def test_the_core_checks_the_options_up_front(kairox_home: Path) -> None:
    config = parse_config(
        {"knowledge_bases": {"papers": {"kind": "tantivy", "path": "x", "title_bost": 3}}},
        source="kx.toml",
    )
    with pytest.raises(ConfigError) as info:
        check_plugin_names(config)
    assert info.value.file == "kx.toml" and info.value.key == "knowledge_bases.papers.title_bost"


def test_wrong_title_field_for_an_index_built_elsewhere(tmp_path: Path) -> None:
    build(CONTRACT_DOCS, tmp_path)
    retriever = TantivyRetriever(
        kb_config("papers", path=str(tmp_path / "index"), title_field="heading")
    )
    with pytest.raises(RetrieverConfigError, match="title_field 'heading'"):
        retriever.search("magma", 3)
