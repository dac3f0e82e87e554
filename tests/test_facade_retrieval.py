"""Sessions query the profile's composite retriever: workspace index + knowledge bases."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kairox_core import Kairox, hookimpl
from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.config import KairoxConfig
from kairox_core.retrieval.base import RetrievalHit, RetrieverUnavailable
from kairox_core.retrieval.index import WorkspaceRagIndex

TEA = (
    "Green tea is brewed at 80 degrees for two minutes. "
    "Black tea wants boiling water and four minutes."
)


class StaticKB:
    capabilities = RetrieverCapabilities()

    def __init__(self, name: str, fail: bool) -> None:
        self.name = name
        self.fail = fail

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        if self.fail:
            raise RetrieverUnavailable(self.name, "connection refused")
        return [RetrievalHit("Matcha is whisked, not steeped.", 0.9, self.name, "doc-17")]

    async def close(self) -> None:
        return None


class KBPlugin:
    @hookimpl
    def kairox_register_retrievers(self, register: Any) -> None:
        register("static", lambda kb: StaticKB(kb.id, bool(kb.options.get("fail"))))


def config() -> KairoxConfig:
    return KairoxConfig.model_validate(
        {
            "profiles": {"default": {"model": "gpt-4o", "context_window": 6000, "reserve": 500}},
            "knowledge_bases": {
                "teadocs": {"kind": "static"},
                "flaky": {"kind": "static", "fail": True},
            },
        }
    )


def test_hits_are_labelled_by_source_and_failures_noted(
    kairox_home: Path, tmp_path: Path, register_plugin: Any
) -> None:
    register_plugin(KBPlugin(), "static-kb")
    cfg = config()
    db = tmp_path / "kx.db"
    index = WorkspaceRagIndex.from_config(cfg, db, "w1")
    index.add_text("docs/tea.md", TEA, path="docs/tea.md")
    index.close()
    with Kairox.open(db, cfg) as kx:
        s = kx.session(workspace="w1")
        turn = s.begin_turn_sync("how hot should green tea be brewed?")
        retrieved = next(
            m["content"] for m in turn.messages if "<kairox:retrieved>" in str(m["content"])
        )
        assert "[workspace docs/tea.md" in retrieved and "80 degrees" in retrieved
        assert "[kb:teadocs doc-17" in retrieved and "Matcha" in retrieved
        layer = turn.trace.layer("retrieval")
        assert {i.source for i in layer.included} == {"workspace", "teadocs"}
        assert any("flaky failed" in n and "connection refused" in n for n in layer.notes)
        by_source = turn.trace.tokens_by_source()
        assert by_source["retrieval:workspace"] > 0 and by_source["retrieval:teadocs"] > 0
        # a memory echoing retrieved text is flagged tainted for the approver
        result = turn.complete_sync(
            '<memory scope="user" key="tea">Green tea is brewed at 80 degrees for two '
            "minutes.</memory>OK"
        )
        assert [p.tainted for p in result.proposals] == [True]
        other = s.run_turn_sync("hello", '<memory scope="user" key="mood">cheerful</memory>')
        assert [p.tainted for p in other.proposals] == [False]
