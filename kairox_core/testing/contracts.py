"""Contract test classes: each retriever or embedding backend subclasses one.

The base classes hold the tests; a subclass supplies the thing under test through a
few factory methods. Every implementation then behaves the same for empty results,
``k``, filters, timeouts, unreachable services and bad credentials.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kairox_core.capabilities import verify
from kairox_core.retrieval.base import (
    EmbeddingBackend,
    RetrievalHit,
    RetrieverAuthError,
    RetrieverError,
    RetrieverTimeout,
    RetrieverUnavailable,
    WorkspaceRetriever,
)


@dataclass(frozen=True)
class ContractDoc:
    id: str
    title: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


# A small corpus in which each probe query has exactly one obvious answer.
CONTRACT_DOCS: tuple[ContractDoc, ...] = (
    ContractDoc(
        "doc-photo",
        "Photosynthesis",
        "Plants turn sunlight into chemical energy with chlorophyll in their leaves.",
        {"category": "biology"},
    ),
    ContractDoc(
        "doc-volcano",
        "Volcanoes",
        "Magma rises through the crust and erupts from a volcano as lava and ash.",
        {"category": "geology"},
    ),
    ContractDoc(
        "doc-tides",
        "Tides",
        "The moon's gravity pulls the oceans and makes the tides rise and fall.",
        {"category": "physics"},
    ),
    ContractDoc(
        "doc-enzyme",
        "Enzymes",
        "Enzymes are proteins that speed up chemical reactions inside living cells.",
        {"category": "biology"},
    ),
    ContractDoc(
        "doc-quartz",
        "Quartz",
        "Quartz is a hard mineral made of silicon and oxygen found in granite.",
        {"category": "geology"},
    ),
)
# query -> the id that must rank first
CONTRACT_PROBES: Mapping[str, str] = {
    "chlorophyll sunlight leaves": "doc-photo",
    "magma lava volcano": "doc-volcano",
    "moon gravity tides": "doc-tides",
}
NO_MATCH_QUERY = "zyxwvut qwertzuiop"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class RetrieverContract:
    """Subclass and implement ``make_retriever``; the other factories are optional."""

    #: set False for services that rank every document for any query (pure vector search)
    empty_for_nonsense: bool = True
    supports_filters: bool = True
    filter_field: str = "category"

    # --- what a subclass provides --------------------------------------------------

    def make_retriever(self, docs: Sequence[ContractDoc], tmp_path: Path) -> WorkspaceRetriever:
        raise NotImplementedError

    def make_unreachable_retriever(self, tmp_path: Path) -> WorkspaceRetriever | None:
        """A retriever pointed at a service that is not there; None to skip."""
        return None

    def make_bad_credentials_retriever(self, tmp_path: Path) -> WorkspaceRetriever | None:
        """A retriever whose credentials the service refuses; None to skip."""
        return None

    def make_slow_retriever(self, tmp_path: Path, timeout: float) -> WorkspaceRetriever | None:
        """A retriever whose service answers later than ``timeout``; None to skip."""
        return None

    # --- the contract --------------------------------------------------------------

    def _retrieve(
        self,
        retriever: WorkspaceRetriever,
        query: str,
        k: int,
        filters: Mapping[str, Any] | None = None,
    ) -> list[RetrievalHit]:
        async def go() -> list[RetrievalHit]:
            try:
                return await retriever.retrieve(query, k, filters)
            finally:
                await retriever.close()

        return list(run(go()))

    def test_declared_capabilities_hold(self, tmp_path: Path) -> None:
        """What the retriever declares (``RetrieverCapabilities``), it implements: the
        check the core makes when it builds a knowledge base."""
        retriever = self.make_retriever(CONTRACT_DOCS, tmp_path)
        try:
            verify(retriever, f"retriever '{retriever.name}'")
        finally:
            run(retriever.close())

    def test_probes_rank_the_obvious_document_first(self, tmp_path: Path) -> None:
        for query, expected in CONTRACT_PROBES.items():
            hits = self._retrieve(self.make_retriever(CONTRACT_DOCS, tmp_path), query, 3)
            assert hits, f"no hits for {query!r}"
            assert hits[0].doc_id == expected, (query, [h.doc_id for h in hits])

    def test_hits_are_well_formed(self, tmp_path: Path) -> None:
        retriever = self.make_retriever(CONTRACT_DOCS, tmp_path)
        name = retriever.name
        hits = self._retrieve(retriever, "chemical energy", 5)
        assert hits
        for hit in hits:
            assert isinstance(hit, RetrievalHit)
            assert hit.source == name
            assert isinstance(hit.text, str) and hit.text
            assert isinstance(hit.score, float) and math.isfinite(hit.score)
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert len({h.doc_id for h in hits}) == len(hits)

    def test_k_bounds_the_number_of_hits(self, tmp_path: Path) -> None:
        for k in (1, 2):
            hits = self._retrieve(self.make_retriever(CONTRACT_DOCS, tmp_path), "chemical", k)
            assert 1 <= len(hits) <= k

    def test_empty_results(self, tmp_path: Path) -> None:
        if not self.empty_for_nonsense:
            pytest.skip("this service ranks every document for any query")
        hits = self._retrieve(self.make_retriever(CONTRACT_DOCS, tmp_path), NO_MATCH_QUERY, 5)
        assert hits == []

    def test_empty_index(self, tmp_path: Path) -> None:
        hits = self._retrieve(self.make_retriever((), tmp_path), "chlorophyll", 5)
        assert hits == []

    def test_filters_restrict_hits(self, tmp_path: Path) -> None:
        if not self.supports_filters:
            pytest.skip("filters not supported")
        hits = self._retrieve(
            self.make_retriever(CONTRACT_DOCS, tmp_path),
            "chemical energy proteins",
            5,
            {self.filter_field: "biology"},
        )
        assert hits
        assert {h.doc_id for h in hits} <= {"doc-photo", "doc-enzyme"}

    def test_unreachable_service_is_a_clear_error(self, tmp_path: Path) -> None:
        retriever = self.make_unreachable_retriever(tmp_path)
        if retriever is None:
            pytest.skip("no remote service")
        with pytest.raises(RetrieverUnavailable) as info:
            self._retrieve(retriever, "chlorophyll", 3)
        assert retriever.name in str(info.value)

    def test_bad_credentials_are_a_clear_error(self, tmp_path: Path) -> None:
        retriever = self.make_bad_credentials_retriever(tmp_path)
        if retriever is None:
            pytest.skip("no credentials involved")
        with pytest.raises(RetrieverAuthError) as info:
            self._retrieve(retriever, "chlorophyll", 3)
        assert retriever.name in str(info.value)

    def test_slow_service_times_out(self, tmp_path: Path) -> None:
        retriever = self.make_slow_retriever(tmp_path, timeout=0.5)
        if retriever is None:
            pytest.skip("no remote service")
        with pytest.raises((RetrieverTimeout, RetrieverError)) as info:
            self._retrieve(retriever, "chlorophyll", 3)
        assert isinstance(info.value, RetrieverTimeout)
        assert retriever.name in str(info.value)


class EmbeddingBackendContract:
    """Subclass and implement ``make_backend``."""

    def make_backend(self) -> EmbeddingBackend:
        raise NotImplementedError

    def test_dimension_and_shape(self) -> None:
        backend = self.make_backend()
        assert isinstance(backend.name, str) and backend.name
        vectors = backend.embed_documents(["one text", "another text", "a third"])
        assert len(vectors) == 3
        assert all(len(v) == backend.dimension for v in vectors)
        assert len(backend.embed_query("a query")) == backend.dimension

    def test_empty_batch(self) -> None:
        assert self.make_backend().embed_documents([]) == []

    def test_deterministic(self) -> None:
        backend = self.make_backend()
        a = backend.embed_query("the moon pulls the tides")
        b = backend.embed_query("the moon pulls the tides")
        assert a == pytest.approx(b, abs=1e-5)

    def test_normalised(self) -> None:
        vec = self.make_backend().embed_query("photosynthesis in green leaves")
        assert math.sqrt(sum(x * x for x in vec)) == pytest.approx(1.0, abs=1e-3)

    def test_similar_texts_are_closer(self) -> None:
        backend = self.make_backend()
        q = backend.embed_query("how do tides work with the moon")
        near, far = backend.embed_documents(
            [
                "The moon's gravity pulls the oceans and makes the tides rise and fall.",
                "Quartz is a hard mineral made of silicon and oxygen.",
            ]
        )

        def dot(a: Sequence[float], b: Sequence[float]) -> float:
            return sum(x * y for x, y in zip(a, b, strict=True))

        assert dot(q, near) > dot(q, far)

    def test_batching_matches_single(self) -> None:
        backend = self.make_backend()
        texts = [f"text number {i} about topic {i % 3}" for i in range(40)]
        batch = backend.embed_documents(texts)
        single = backend.embed_documents([texts[17]])[0]
        assert batch[17] == pytest.approx(single, abs=1e-4)


class IndexableRetrieverContract:
    """For knowledge bases that build their own index: ``kairox kb index ID PATH...``.

    Subclass and implement ``make_indexable_retriever``; it returns a retriever (also an
    ``IndexableRetriever``) whose index lives under ``tmp_path`` and starts empty. Each
    contract document is written as ``<id>.md``; hits name the file in ``doc_id``.
    """

    def make_indexable_retriever(self, tmp_path: Path) -> WorkspaceRetriever:
        raise NotImplementedError

    def _corpus(self, tmp_path: Path) -> Path:
        folder = tmp_path / "corpus"
        folder.mkdir(exist_ok=True)
        for doc in CONTRACT_DOCS:
            (folder / f"{doc.id}.md").write_text(f"# {doc.title}\n\n{doc.text}\n")
        return folder

    def _index(self, retriever: WorkspaceRetriever, paths: Sequence[Path]) -> Any:
        from kairox_core.retrieval.base import IndexableRetriever, IndexReport

        assert isinstance(retriever, IndexableRetriever)
        seen: list[int] = []
        report = retriever.index(
            [str(p) for p in paths], progress=lambda done, total, item: seen.append(done)
        )
        assert isinstance(report, IndexReport)
        return report

    def _top(self, retriever: WorkspaceRetriever, query: str) -> list[str]:
        async def go() -> list[RetrievalHit]:
            try:
                return await retriever.retrieve(query, 3)
            finally:
                await retriever.close()

        return [Path(h.doc_id).stem for h in run(go())]

    def test_index_then_search(self, tmp_path: Path) -> None:
        folder = self._corpus(tmp_path)
        retriever = self.make_indexable_retriever(tmp_path)
        report = self._index(retriever, [folder])
        assert report.added == len(CONTRACT_DOCS) and not report.errors
        for query, expected in CONTRACT_PROBES.items():
            assert self._top(retriever, query)[:1] == [expected], query

    def test_reindex_is_incremental(self, tmp_path: Path) -> None:
        folder = self._corpus(tmp_path)
        retriever = self.make_indexable_retriever(tmp_path)
        self._index(retriever, [folder])
        again = self._index(retriever, [folder])
        assert (again.added, again.updated, again.removed) == (0, 0, 0)
        assert again.unchanged == len(CONTRACT_DOCS)
        (folder / "doc-volcano.md").unlink()
        (folder / "doc-tides.md").write_text("# Tides\n\nNow about volcano lava and magma.\n")
        changed = self._index(retriever, [folder])
        assert (changed.updated, changed.removed) == (1, 1)
        assert self._top(retriever, "magma lava volcano")[:1] == ["doc-tides"]

    def test_binary_files_are_skipped(self, tmp_path: Path) -> None:
        folder = self._corpus(tmp_path)
        (folder / "image.bin").write_bytes(b"\x00\x01\x02binary")
        report = self._index(self.make_indexable_retriever(tmp_path), [folder])
        assert report.skipped_binary == 1 and report.added == len(CONTRACT_DOCS)
