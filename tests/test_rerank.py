"""Rerankers: the hook, the warm cache, reranking the fused top-N of workspace search
and of recall, per profile, and a broken reranker that never fails a turn."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kairox_core import hookimpl
from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.cli import main
from kairox_core.config import (
    CompactionSection,
    KairoxConfig,
    ProfileConfig,
    RecallSection,
    RetrievalSection,
    check_plugin_names,
    parse_config,
)
from kairox_core.errors import ConfigError, KairoxUserError
from kairox_core.facade import Kairox
from kairox_core.plugins import PluginHost
from kairox_core.recall.engine import recall_of
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.retrieval.composite import CompositeWorkspaceRetriever
from kairox_core.retrieval.embeddings import load_embedding_backend
from kairox_core.retrieval.index import WorkspaceRagIndex
from kairox_core.retrieval.rerank import Reranker, load_reranker, rerank
from kairox_core.retrieval.selection import retriever_for_profile
from kairox_core.retrieval.warm import clear_warm
from kairox_core.testing.reranker_contract import RerankerContract

_WORD = re.compile(r"\w+")


class Overlap:
    """Scores a passage by how many of the query's words it contains (x ``scale``)."""

    def __init__(self, scale: float = 1.0, fail: bool = False) -> None:
        self.name = "overlap"
        self.scale = scale
        self.fail = fail
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((query, list(texts)))
        if self.fail:
            raise RuntimeError("model exploded")
        words = set(_WORD.findall(query.lower()))
        return [self.scale * len(words & set(_WORD.findall(t.lower()))) for t in texts]


class OverlapPlugin:
    def __init__(self) -> None:
        self.built: list[Overlap] = []

    @hookimpl
    def kairox_register_rerankers(self, register: Callable[..., None]) -> None:
        def make(scale: float = 1.0, fail: bool = False) -> Overlap:
            reranker = Overlap(scale, fail)
            self.built.append(reranker)
            return reranker

        register("overlap", make)


@pytest.fixture
def overlap(register_plugin: Callable[[object, str], PluginHost]) -> Iterator[OverlapPlugin]:
    clear_warm()
    plugin = OverlapPlugin()
    register_plugin(plugin, "overlap-test")
    yield plugin
    clear_warm()


def hits(*texts: str, source: str = "src") -> list[RetrievalHit]:
    return [RetrievalHit(t, 1.0 / (i + 1), source, f"d{i}") for i, t in enumerate(texts)]


def test_the_hook_registers_a_reranker_built_once_per_options(overlap: OverlapPlugin) -> None:
    first = load_reranker("overlap")
    assert isinstance(first, Reranker)
    assert load_reranker("overlap") is first  # warm: one model load per process
    scaled = load_reranker("overlap", {"scale": 2.0})
    assert scaled is not first and len(overlap.built) == 2
    with pytest.raises(KairoxUserError, match="rejected its options"):
        load_reranker("overlap", {"scael": 2.0})
    with pytest.raises(KairoxUserError, match="no installed plugin provides the reranker"):
        load_reranker("no-such-reranker")


def test_plugins_report_what_they_register(overlap: OverlapPlugin) -> None:
    from kairox_core.plugins import get_plugins

    infos = {i.name: i for i in get_plugins().plugin_infos()}
    assert infos["overlap-test"].registers["rerankers"] == ["overlap"]
    assert "kairox_register_rerankers" in infos["overlap-test"].hooks


def test_embedding_backends_stay_warm_too() -> None:
    clear_warm()
    a = load_embedding_backend("hashing", {"dimension": 64})
    assert load_embedding_backend("hashing", {"dimension": 64}) is a
    assert load_embedding_backend("hashing", {"dimension": 96}) is not a


def test_rerank_reorders_only_the_top_n_and_keeps_ties_in_fused_order() -> None:
    found = hits("nothing here", "apple pie", "apple pie recipe", "pie", "apple pie recipe too")
    out = rerank(Overlap(), "apple pie recipe", found, top_n=4)
    assert [h.text for h in out] == [
        "apple pie recipe",  # 3 words
        "apple pie",  # 2
        "pie",  # 1
        "nothing here",  # 0
        "apple pie recipe too",  # beyond top_n: stays behind, unscored
    ]
    assert [h.metadata["fused_rank"] for h in out[:4]] == [3, 2, 4, 1]
    assert [h.metadata["rerank_score"] for h in out[:4]] == [3.0, 2.0, 1.0, 0.0]
    assert "rerank_score" not in out[4].metadata
    assert out[0].score == found[2].score  # the fused score is kept
    tie = rerank(Overlap(), "zzz", found, top_n=5)
    assert [h.doc_id for h in tie] == [h.doc_id for h in found]


def test_a_reranker_returning_the_wrong_number_of_scores_is_an_error() -> None:
    class Short:
        name = "short"

        def score(self, query: str, texts: Sequence[str]) -> list[float]:
            return [1.0]

    with pytest.raises(KairoxUserError, match="returned 1 scores for 3 passages"):
        rerank(Short(), "q", hits("a", "b", "c"))


class Static:
    capabilities = RetrieverCapabilities()

    def __init__(self, name: str, texts: Sequence[str]) -> None:
        self.name = name
        self.found = hits(*texts, source=name)
        self.asked: list[int] = []

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        self.asked.append(k)
        return self.found[:k]

    async def close(self) -> None:
        return None


async def test_the_composite_reranks_the_fused_top_n_then_cuts_to_k() -> None:
    texts = [f"filler {i}" for i in range(9)] + ["the answer about volcanoes"]
    source = Static("workspace", texts)
    reranker = Overlap()
    composite = CompositeWorkspaceRetriever([source], reranker=reranker, rerank_top_n=10)
    result = await composite.search("volcanoes answer", 3)
    assert source.asked == [10]  # asked for the reranker's pool, not only k
    assert len(result.hits) == 3 and result.hits[0].text == "the answer about volcanoes"
    assert result.rerank is not None and result.rerank.ok and result.rerank.reranked == 10
    assert len(reranker.calls[0][1]) == 10
    plain = await CompositeWorkspaceRetriever([Static("workspace", texts)]).search("volcanoes", 3)
    assert plain.rerank is None and [h.text for h in plain.hits] == texts[:3]


async def test_a_failing_reranker_keeps_the_fused_order_and_is_reported() -> None:
    texts = ["a", "b volcano", "c"]
    composite = CompositeWorkspaceRetriever(
        [Static("workspace", texts)], reranker=Overlap(fail=True), rerank_top_n=5
    )
    result = await composite.search("volcano", 3)
    assert [h.text for h in result.hits] == texts
    assert result.rerank is not None and not result.rerank.ok
    assert result.rerank.error == "RuntimeError: model exploded"


def _profiles_config(tmp_path: Path, reranker: str = "overlap") -> KairoxConfig:
    return parse_config(
        {
            "profiles": {
                "default": {},
                "careful": {
                    "reranker": reranker,
                    "reranker_options": {"scale": 3.0},
                    "rerank_top_n": 7,
                    "aliases": ["c"],
                },
            },
        }
    )


def test_the_reranker_is_chosen_per_profile(overlap: OverlapPlugin, tmp_path: Path) -> None:
    config = _profiles_config(tmp_path)
    db = tmp_path / "kx.db"
    WorkspaceRagIndex(db, "default").add_text("ws-1", "volcano notes")
    careful = retriever_for_profile(config, "c", db)
    assert isinstance(careful.reranker, Overlap) and careful.reranker.scale == 3.0
    assert careful.rerank_top_n == 7
    assert retriever_for_profile(config, "default", db).reranker is None
    check_plugin_names(config)  # the reranker is provided
    with pytest.raises(ConfigError, match=r"profiles\.careful\.reranker"):
        check_plugin_names(_profiles_config(tmp_path, reranker="missing"))


def _recall_config(reranker: Mapping[str, Any] | None) -> KairoxConfig:
    extra: dict[str, Any] = dict(reranker or {})
    return KairoxConfig(
        profiles={
            "default": ProfileConfig(
                model="gpt-4o", encoding="o200k_base", context_window=1400, reserve=200, **extra
            )
        },
        retrieval=RetrievalSection(backend="hashing", share=0.4, workspace_index=False),
        compaction=CompactionSection(keep_recent_exchanges=2, target_tokens=60),
        recall=RecallSection(k=8),
    )


def _chat(kx: Kairox) -> str:
    session = kx.session(workspace="w", profile="default")
    for i in range(12):
        session.run_turn_sync(
            f"turn {i}: the garden and the beans, tomatoes {'and the volcano ' * (i % 3)}",
            f"noted {i}",
        )
    return session.id


def test_recall_reranks_its_turns_with_the_profiles_reranker(
    overlap: OverlapPlugin, tmp_path: Path
) -> None:
    db = tmp_path / "kx.db"
    prompt = "what did I say about the volcano and the garden"
    with Kairox.open(db, _recall_config(None)) as kx:
        sid = _chat(kx)
        session = kx.session(workspace="w", profile="default", session_id=sid)
        fused = recall_of(kx).turns(session, prompt)
    assert len(fused) >= 4
    config = _recall_config({"reranker": "overlap", "rerank_top_n": 4})
    with Kairox.open(db, config) as kx:
        session = kx.session(workspace="w", profile="default", session_id=sid)
        reranked = recall_of(kx).turns(session, prompt)
    assert sorted(h.doc_id for h in reranked) == sorted(h.doc_id for h in fused)
    head = reranked[:4]
    assert {h.doc_id for h in head} == {h.doc_id for h in fused[:4]}
    scores = [h.metadata["rerank_score"] for h in head]
    assert scores == sorted(scores, reverse=True)
    assert [h.doc_id for h in reranked[4:]] == [h.doc_id for h in fused[4:]]
    assert all(h.source == "recall" for h in reranked)


def test_a_failing_reranker_never_fails_recall(overlap: OverlapPlugin, tmp_path: Path) -> None:
    config = _recall_config({"reranker": "overlap", "reranker_options": {"fail": True}})
    with (
        Kairox.open(tmp_path / "kx.db", config) as kx,
        pytest.warns(RuntimeWarning, match="reranker 'overlap' failed, fused order kept"),
    ):
        sid = _chat(kx)  # every turn recalls: none of them fails
        session = kx.session(workspace="w", profile="default", session_id=sid)
        turns = recall_of(kx).turns(session, "volcano")
    assert turns and all("rerank_score" not in h.metadata for h in turns)


def test_search_reports_its_time_and_the_reranker(
    kairox_home: Path, overlap: OverlapPlugin, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kairox.toml").write_text(
        '[kairox]\ndatabase = "kx.db"\n[profiles.default]\nreranker = "overlap"\n'
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("volcano lava magma")
    # both match "volcano": keyword search (the default with the hashing backend) returns
    # only matching documents, and a reranker has nothing to reorder in a single hit
    (docs / "b.md").write_text("garden beans, far from the volcano")
    outputs = []
    for args in (["index", str(docs)], ["search", "volcano", "--json"]):
        try:
            main(args)
        except SystemExit as exc:
            assert not exc.code
        outputs.append(capsys.readouterr().out)
    data = json.loads(outputs[-1])
    assert data["rerank"]["name"] == "overlap" and data["rerank"]["ok"]
    assert data["elapsed_ms"] >= 0 and data["open_ms"] >= 0
    try:
        main(["search", "volcano"])
    except SystemExit as exc:
        assert not exc.code
    err = capsys.readouterr().err
    assert "search time:" in err and "reranker 'overlap': ok" in err


class TestOverlapRerankerContract(RerankerContract):
    """The contract on this suite's word-overlap reranker (core ships no reranker of its
    own: the cross-encoder is kairox-sentence-transformers')."""

    def make_reranker(self) -> Reranker:
        return Overlap()
