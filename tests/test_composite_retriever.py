"""CompositeWorkspaceRetriever: concurrency, timeouts, failures, RRF fusion, dedupe."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pytest

from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.retrieval import WorkspaceRetriever
from kairox_core.retrieval.base import RetrievalHit, RetrieverUnavailable
from kairox_core.retrieval.composite import CompositeWorkspaceRetriever, RetrieverSource
from kairox_core.retrieval.fusion import rrf_fuse


class Static:
    """Returns fixed hits once ``gate`` (if any) is open; may raise. ``answered`` says
    whether a call got past the gate (a source the composite gave up on never does)."""

    capabilities = RetrieverCapabilities()

    def __init__(
        self,
        name: str,
        hits: Sequence[tuple[str, str]],
        *,
        gate: Callable[[], Awaitable[object]] | None = None,
        error: Exception | None = None,
    ) -> None:
        self.name = name
        self.hits = [
            RetrievalHit(text, 1.0 / (i + 1), name, doc_id) for i, (doc_id, text) in enumerate(hits)
        ]
        self.gate = gate
        self.error = error
        self.closed = False
        self.answered = False
        self.seen_filters: Mapping[str, Any] | None = None

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        self.seen_filters = filters
        if self.gate is not None:
            await self.gate()
        self.answered = True
        if self.error is not None:
            raise self.error
        return self.hits[:k]

    async def close(self) -> None:
        self.closed = True


def test_static_is_a_retriever() -> None:
    assert isinstance(Static("x", []), WorkspaceRetriever)


async def test_a_failing_and_a_hanging_source_do_not_block_the_others() -> None:
    good = Static("workspace", [("a", "alpha"), ("b", "beta")])
    broken = Static("wiki", [], error=RetrieverUnavailable("wiki", "connection refused"))
    hanging = Static("slow", [("z", "zeta")], gate=asyncio.Event().wait)  # never opens
    composite = CompositeWorkspaceRetriever(
        [
            RetrieverSource(good, "workspace"),
            RetrieverSource(broken),
            RetrieverSource(hanging, timeout=0.2),
        ]
    )
    result = await composite.search("q", 5)
    assert not hanging.answered  # the search returned without it
    assert [h.doc_id for h in result.hits] == ["a", "b"]
    reports = {r.name: r for r in result.sources}
    assert reports["workspace"].ok and reports["workspace"].hits == 2
    assert reports["workspace"].kind == "workspace"
    assert not reports["wiki"].ok and "connection refused" in (reports["wiki"].error or "")
    assert reports["wiki"].kind == "knowledge_base"
    assert not reports["slow"].ok and reports["slow"].timed_out
    assert "timed out" in (reports["slow"].error or "")
    assert reports["slow"].elapsed_ms >= 150  # it had its timeout
    assert [r.name for r in result.failed] == ["wiki", "slow"]


async def test_sources_run_concurrently() -> None:
    # each source answers only once all four are in flight: one at a time, none would
    # (each would time out waiting for the others)
    together = asyncio.Barrier(4)
    sources = [Static(f"s{i}", [(f"d{i}", f"text {i}")], gate=together.wait) for i in range(4)]
    result = await CompositeWorkspaceRetriever(sources).search("q", 10)
    assert [s.ok for s in result.sources] == [True] * 4
    assert len(result.hits) == 4


async def test_rrf_with_weights() -> None:
    a = Static("a", [("1", "one"), ("2", "two")])
    b = Static("b", [("3", "three"), ("4", "four")])
    even = await CompositeWorkspaceRetriever([a, b]).search("q", 4)
    assert [h.doc_id for h in even.hits][:2] in (["1", "3"], ["3", "1"])
    assert even.hits[0].score == pytest.approx(1 / 61)
    heavy = await CompositeWorkspaceRetriever([a, b], {"b": 3.0}).search("q", 4)
    assert [h.doc_id for h in heavy.hits] == ["3", "4", "1", "2"]
    assert heavy.hits[0].score == pytest.approx(3 / 61)


async def test_duplicates_merge_by_doc_id_and_by_content() -> None:
    a = Static("a", [("x", "shared text"), ("y", "only in a")])
    b = Static("b", [("x", "shared text, other chunk"), ("q", "Only  in A")])
    result = await CompositeWorkspaceRetriever([a, b]).search("q", 10)
    ids = [h.doc_id for h in result.hits]
    assert ids == ["x", "y"]  # "q" has the same (normalised) text as "y"
    assert result.hits[0].score == pytest.approx(2 / 61)
    assert result.hits[0].metadata["sources"] == ["a", "b"]
    assert result.hits[1].score == pytest.approx(1 / 62 + 1 / 62)


async def test_retrieve_returns_hits_and_close_closes_all() -> None:
    a, b = Static("a", [("1", "one")]), Static("b", [("2", "two")])
    composite = CompositeWorkspaceRetriever([a, b], timeouts={"b": 0.5})
    assert isinstance(composite, WorkspaceRetriever)
    hits = await composite.retrieve("q", 1, {"path": "*.md"})
    assert len(hits) == 1 and a.seen_filters == {"path": "*.md"}
    await composite.close()
    assert a.closed and b.closed


async def test_empty() -> None:
    assert (await CompositeWorkspaceRetriever([]).search("q", 3)).hits == []
    assert (await CompositeWorkspaceRetriever([Static("a", [])]).search("q", 0)).hits == []


def test_duplicate_source_names_are_refused() -> None:
    with pytest.raises(ValueError, match="two retrieval sources"):
        CompositeWorkspaceRetriever([Static("a", []), Static("a", [])])


def test_rrf_fuse_is_order_stable() -> None:
    hits = [RetrievalHit("t1", 1.0, "s", "1"), RetrievalHit("t2", 0.5, "s", "2")]
    fused = rrf_fuse({"s": hits}, limit=1)
    assert [h.doc_id for h in fused] == ["1"] and fused[0].metadata["source_score"] == 1.0
