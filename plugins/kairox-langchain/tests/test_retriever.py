"""KairoxRetriever: langchain-tests' standard retriever suite, and what Kairox adds
(workspace index and knowledge bases fused, source and score in metadata)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from lc_helpers import make_config

from kairox_core import Kairox, hookimpl
from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.retrieval import (
    RetrievalHit,
    RetrieverError,
    RetrieverUnavailable,
    WorkspaceRagIndex,
)
from kairox_langchain import KairoxRetriever

NOTES = {
    "tea.md": "Green tea is brewed at 80 degrees for two minutes.",
    "coffee.md": "Espresso is brewed at 93 degrees under nine bars of pressure.",
    "water.md": "Water for black tea is brought to a rolling boil before brewing.",
    "bread.md": "Sourdough is baked at 250 degrees after a long cold proof.",
    "rice.md": "Rice is steamed for eighteen minutes and rested for ten.",
}


def indexed_kairox(tmp_path: Path, **config: object) -> Kairox:
    cfg = make_config(**config)
    db = tmp_path / "kx.db"
    index = WorkspaceRagIndex.from_config(cfg, db, "kitchen")
    for name, text in NOTES.items():
        index.add_text(f"notes/{name}", text, path=f"notes/{name}")
    index.close()
    return Kairox.open(db, cfg)


class TestStandardSuite(RetrieversIntegrationTests):
    kx: Kairox

    @pytest.fixture(autouse=True)
    def _kairox(self, kairox_home: Path, tmp_path: Path) -> Iterator[None]:
        self.kx = indexed_kairox(tmp_path)
        yield
        self.kx.close()

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return KairoxRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"kx": self.kx, "workspace": "kitchen"}

    @property
    def retriever_query_example(self) -> str:
        return "at what temperature is it brewed"


def test_documents_carry_source_and_score(kairox_home: Path, tmp_path: Path) -> None:
    with indexed_kairox(tmp_path) as kx:
        docs = KairoxRetriever(kx=kx, workspace="kitchen", k=2).invoke("green tea degrees")
        assert docs[0].page_content == NOTES["tea.md"]
        meta = docs[0].metadata
        assert meta["source"] == "workspace" and meta["doc_id"] == "notes/tea.md"
        assert isinstance(meta["score"], float) and meta["score"] >= docs[1].metadata["score"]


def test_another_workspace_sees_nothing(kairox_home: Path, tmp_path: Path) -> None:
    with indexed_kairox(tmp_path) as kx:
        assert KairoxRetriever(kx=kx, workspace="garage").invoke("green tea") == []


FILTERS_SEEN: list[Any] = []


class StaticKB:
    capabilities = RetrieverCapabilities()

    def __init__(self, name: str, fail: bool) -> None:
        self.name = name
        self.fail = fail

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        FILTERS_SEEN.append(filters)
        if self.fail:
            raise RetrieverUnavailable(self.name, "connection refused")
        return [RetrievalHit("Matcha is whisked, not steeped.", 0.9, self.name, "doc-17")]

    async def close(self) -> None:
        return None


class KBPlugin:
    @hookimpl
    def kairox_register_retrievers(self, register: Any) -> None:
        register("static", lambda kb: StaticKB(kb.id, bool(kb.options.get("fail"))))


def test_knowledge_bases_are_fused_with_the_workspace_and_failures_said(
    kairox_home: Path, tmp_path: Path, register_plugin: Any
) -> None:
    register_plugin(KBPlugin(), "static-kb")
    kbs = {"teadocs": {"kind": "static"}, "flaky": {"kind": "static", "fail": True}}
    with indexed_kairox(tmp_path, knowledge_bases=kbs) as kx:
        retriever = KairoxRetriever(kx=kx, workspace="kitchen", k=8)
        with pytest.warns(RuntimeWarning, match=r"flaky failed: .*connection refused"):
            docs = retriever.invoke("how is green tea made")
        sources = {d.metadata["source"] for d in docs}
        assert sources == {"workspace", "teadocs"}
        assert any(d.page_content.startswith("Matcha") for d in docs)
        FILTERS_SEEN.clear()
        with pytest.warns(RuntimeWarning) as warned:
            retriever.invoke("green tea", filters={"lang": "en"})
        assert [str(w.message).split(" failed")[0] for w in warned] == [
            "Kairox retrieval source flaky"
        ]
        assert FILTERS_SEEN == [{"lang": "en"}, {"lang": "en"}]  # both knowledge bases


def test_every_source_failing_is_an_error(
    kairox_home: Path, tmp_path: Path, register_plugin: Any
) -> None:
    register_plugin(KBPlugin(), "static-kb")
    cfg = make_config(
        knowledge_bases={"flaky": {"kind": "static", "fail": True}},
        retrieval={"backend": "hashing", "workspace_index": False},
    )
    with (
        Kairox.open(tmp_path / "kx.db", cfg) as kx,
        pytest.raises(RetrieverError, match=r"flaky: .*connection refused"),
    ):
        KairoxRetriever(kx=kx, workspace="kitchen").invoke("anything")


async def test_async_and_sync_share_one_client(kairox_home: Path, tmp_path: Path) -> None:
    with indexed_kairox(tmp_path) as kx:
        retriever = KairoxRetriever(kx=kx, workspace="kitchen", k=1)
        first = await retriever.ainvoke("sourdough")
        second = retriever.invoke("sourdough")
        assert (
            first
            == second
            == [Document(page_content=NOTES["bread.md"], metadata=first[0].metadata)]
        )
        retriever.close()
