"""KairoxRetriever: Kairox's composite search (workspace index + knowledge bases, RRF
fusion) as LlamaIndex NodeWithScore, sync and async, with failures said."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore

from kairox_core import Kairox, KairoxConfig, hookimpl
from kairox_core.retrieval import RetrievalHit, RetrieverCapabilities, RetrieverUnavailable
from kairox_llamaindex import KairoxRetriever, KairoxSearchError

TEA = "Green tea is brewed at 80 degrees for two minutes. Black tea wants boiling water."


class StaticKB:
    """A knowledge base with one fixed passage, or one that is down."""

    capabilities = RetrieverCapabilities()

    def __init__(self, name: str, fail: bool, seen: list[Any]) -> None:
        self.name, self.fail, self.seen = name, fail, seen

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        self.seen.append((self.name, query, dict(filters or {})))
        if self.fail:
            raise RetrieverUnavailable(self.name, "connection refused")
        hit = RetrievalHit(
            "Matcha is whisked, not steeped.", 0.9, self.name, "doc-17", {"team": "tea"}
        )
        return [hit]

    async def close(self) -> None:
        return None


class KBPlugin:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    @hookimpl
    def kairox_register_retrievers(self, register: Any) -> None:
        register("static", lambda kb: StaticKB(kb.id, bool(kb.options.get("fail")), self.seen))


def config(*kbs: tuple[str, bool], workspace_index: bool = True) -> KairoxConfig:
    return KairoxConfig.model_validate(
        {
            "profiles": {"default": {"model": "gpt-4o", "context_window": 6000, "reserve": 500}},
            "knowledge_bases": {name: {"kind": "static", "fail": fail} for name, fail in kbs},
            "retrieval": {"workspace_index": workspace_index},
        }
    )


@pytest.fixture
def plugin(kairox_home: Path, register_plugin: Any) -> KBPlugin:
    kb = KBPlugin()
    register_plugin(kb, "static-kb")
    return kb


def open_kx(tmp_path: Path, cfg: KairoxConfig) -> Kairox:
    kx = Kairox.open(tmp_path / "kx.db", cfg)
    index = kx.storage.workspace_index(kx.config, "w")
    index.add_text("docs/tea.md", TEA, path="docs/tea.md", title="Tea")
    return kx


@pytest.fixture
def kx(plugin: KBPlugin, tmp_path: Path) -> Iterator[Kairox]:
    with open_kx(tmp_path, config(("teadocs", False))) as kairox:
        yield kairox


def by_source(nodes: list[NodeWithScore]) -> dict[str, NodeWithScore]:
    return {n.node.metadata["source"]: n for n in nodes}


async def test_fused_hits_from_workspace_and_knowledge_base(kx: Kairox) -> None:
    retriever = KairoxRetriever(kx, workspace="w", k=5)
    nodes = await retriever.aretrieve("how hot should green tea be brewed?")
    found = by_source(nodes)
    assert set(found) == {"workspace", "teadocs"}
    assert "80 degrees" in found["workspace"].node.get_content()
    assert found["workspace"].node.metadata["doc_id"] == "docs/tea.md"
    kb = found["teadocs"]
    assert kb.node.get_content() == "Matcha is whisked, not steeped."
    metadata = kb.node.metadata
    assert (metadata["team"], metadata["source"], metadata["doc_id"]) == (
        "tea",
        "teadocs",
        "doc-17",
    )
    assert metadata["source_score"] == 0.9  # the knowledge base's own score, kept by fusion
    # the scores are Kairox's fused (RRF) scores, best first, as the composite ranked them
    result = retriever.last_result
    assert result is not None
    assert [n.score for n in nodes] == [h.score for h in result.hits]
    assert [n.node.metadata["source"] for n in nodes] == [h.source for h in result.hits]
    assert all(n.score is not None and n.score > 0 for n in nodes)
    await retriever.aclose()


def test_sync_retrieve_and_filters(kx: Kairox, plugin: KBPlugin) -> None:
    retriever = KairoxRetriever(kx, workspace="w", k=3, filters={"team": "tea"})
    nodes = retriever.retrieve("matcha")
    assert "teadocs" in by_source(nodes)
    assert ("teadocs", "matcha", {"team": "tea"}) in plugin.seen
    retriever.close()


async def test_for_session_searches_what_its_turns_search(kx: Kairox) -> None:
    session = kx.session(workspace="w")
    retriever = KairoxRetriever.for_session(session)
    assert (retriever.workspace, retriever.profile, retriever.k) == (
        "w",
        "default",
        kx.config.retrieval.k,
    )
    assert await retriever.aretrieve("   ") == []
    await retriever.aclose()


async def test_one_failed_source_is_logged_not_fatal(
    plugin: KBPlugin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with open_kx(tmp_path, config(("teadocs", False), ("flaky", True))) as kx:
        retriever = KairoxRetriever(kx, workspace="w")
        with caplog.at_level(logging.WARNING, logger="kairox_llamaindex"):
            nodes = await retriever.aretrieve("green tea")
        assert set(by_source(nodes)) == {"workspace", "teadocs"}
        assert "1 of 3 sources failed: flaky:" in caplog.text
        assert "connection refused" in caplog.text
        strict = KairoxRetriever(kx, workspace="w", strict=True)
        with pytest.raises(KairoxSearchError, match=r"flaky: .*connection refused"):
            await strict.aretrieve("green tea")
        await retriever.aclose()
        await strict.aclose()


async def test_every_source_failing_raises(plugin: KBPlugin, tmp_path: Path) -> None:
    cfg = config(("flaky", True), workspace_index=False)
    with open_kx(tmp_path, cfg) as kx:
        retriever = KairoxRetriever(kx, workspace="w")
        with pytest.raises(KairoxSearchError, match=r"workspace 'w' .*flaky"):
            await retriever.aretrieve("green tea")
        await retriever.aclose()


def test_bad_arguments_are_clear(kx: Kairox) -> None:
    with pytest.raises(ValueError, match="k must be at least 1"):
        KairoxRetriever(kx, k=0)
    with pytest.raises(Exception, match="nosuch"):
        KairoxRetriever(kx, profile="nosuch")
