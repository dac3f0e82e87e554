"""CompositeWorkspaceRetriever: every active source at once, fused by RRF.

Sources run concurrently, each under its own timeout. A source that raises or is too
slow is recorded in the per-source report and the others' hits still come back: a
broken knowledge base degrades a turn, it never fails it. A timeout can only abandon
a source that yields to the loop: blocking work belongs in ``run_blocking`` (a daemon
thread nothing waits for), and a source that blocks the loop itself past its timeout
is measured (``LoopClock``) and reported as failed, its hits dropped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.retrieval.base import RetrievalHit, WorkspaceRetriever
from kairox_core.retrieval.fusion import RRF_K, rrf_fuse
from kairox_core.retrieval.rerank import DEFAULT_TOP_N, Reranker, rerank
from kairox_core.retrieval.threads import LoopClock

DEFAULT_TIMEOUT = 10.0
MAX_REFILLS = 3  # deeper re-queries when shared passages left fewer than k fused hits


def _may_hold_more(
    src: RetrieverSource, found: list[RetrievalHit], report: SourceReport, asked: int
) -> bool:
    """A source that answered in time with a full list, and has time left to ask again."""
    left = src.timeout - report.elapsed_ms / 1000
    return report.ok and len(found) >= asked and left > 0.1 * src.timeout


@dataclass(frozen=True)
class RetrieverSource:
    """One source of the composite: the retriever, its kind, weight and timeout."""

    retriever: WorkspaceRetriever
    kind: str = "knowledge_base"  # "workspace" | "knowledge_base"
    weight: float = 1.0
    timeout: float = DEFAULT_TIMEOUT

    @property
    def name(self) -> str:
        return self.retriever.name


@dataclass(frozen=True)
class SourceReport:
    """How one source did for one query (for the turn trace and ``kairox search``)."""

    name: str
    kind: str
    ok: bool
    error: str | None
    elapsed_ms: float
    hits: int
    timed_out: bool = False
    blocked_ms: float = 0.0  # time the source held the event loop (synchronous work)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "ok": self.ok,
            "error": self.error,
            "elapsed_ms": round(self.elapsed_ms, 2),
            "hits": self.hits,
            "timed_out": self.timed_out,
            "blocked_ms": round(self.blocked_ms, 2),
        }


@dataclass(frozen=True)
class RerankReport:
    """How the reranker did for one query; on failure the fused order was kept."""

    name: str
    ok: bool
    error: str | None
    elapsed_ms: float
    reranked: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "error": self.error,
            "elapsed_ms": round(self.elapsed_ms, 2),
            "reranked": self.reranked,
        }


@dataclass(frozen=True)
class CompositeResult:
    hits: list[RetrievalHit]
    sources: list[SourceReport] = field(default_factory=list)
    rerank: RerankReport | None = None

    @property
    def failed(self) -> list[SourceReport]:
        return [s for s in self.sources if not s.ok]


class CompositeWorkspaceRetriever:
    """Queries every source concurrently and fuses their rankings (weighted RRF, k=60).

    ``retrievers`` are ``RetrieverSource`` entries or bare retrievers (kind is
    "workspace" when the name is "workspace"); ``weights`` and ``timeouts`` map source
    names to overrides; ``timeout`` is the default per-source timeout in seconds. With a
    ``reranker``, each source is asked for at least ``rerank_top_n`` hits and the fused
    top ``rerank_top_n`` are reordered by it before the first ``k`` are returned.
    """

    name = "composite"

    capabilities = RetrieverCapabilities()

    def __init__(
        self,
        retrievers: Sequence[RetrieverSource | WorkspaceRetriever],
        weights: Mapping[str, float] | None = None,
        *,
        timeouts: Mapping[str, float] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        rrf_k: int = RRF_K,
        per_source_k: int | None = None,
        reranker: Reranker | None = None,
        rerank_top_n: int = DEFAULT_TOP_N,
    ) -> None:
        self.sources: list[RetrieverSource] = []
        for item in retrievers:
            src = (
                item
                if isinstance(item, RetrieverSource)
                else RetrieverSource(
                    item,
                    "workspace" if item.name == "workspace" else "knowledge_base",
                    timeout=timeout,
                )
            )
            if weights and src.name in weights:
                src = RetrieverSource(
                    src.retriever, src.kind, float(weights[src.name]), src.timeout
                )
            if timeouts and src.name in timeouts:
                src = RetrieverSource(
                    src.retriever, src.kind, src.weight, float(timeouts[src.name])
                )
            if any(s.name == src.name for s in self.sources):
                raise ValueError(f"two retrieval sources are named '{src.name}'")
            self.sources.append(src)
        self.rrf_k = rrf_k
        self.per_source_k = per_source_k
        self.reranker = reranker
        self.rerank_top_n = rerank_top_n
        self.rerank_timeout = timeout

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.sources]

    async def _one(
        self, src: RetrieverSource, query: str, k: int, filters: Mapping[str, Any] | None
    ) -> tuple[list[RetrievalHit], SourceReport]:
        start = time.perf_counter()
        clock = LoopClock()
        try:
            hits = await asyncio.wait_for(
                clock.watch(src.retriever.retrieve(query, k, filters)), timeout=src.timeout
            )
        except asyncio.TimeoutError:
            ms = (time.perf_counter() - start) * 1000
            error = f"timed out after {src.timeout:g}s"
            return [], SourceReport(
                src.name, src.kind, False, error, ms, 0, True, clock.blocked * 1000
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any source's failure is reported, never propagated
            ms = (time.perf_counter() - start) * 1000
            message = str(exc) or type(exc).__name__
            return [], SourceReport(
                src.name,
                src.kind,
                False,
                f"{type(exc).__name__}: {message}",
                ms,
                0,
                blocked_ms=clock.blocked * 1000,
            )
        ms = (time.perf_counter() - start) * 1000
        if clock.blocked > src.timeout:  # wait_for could not fire: the loop was held
            error = (
                f"blocked the event loop for {clock.blocked:.1f}s (timeout {src.timeout:g}s); "
                "its blocking work belongs in a thread (kairox_core.retrieval.run_blocking)"
            )
            return [], SourceReport(
                src.name, src.kind, False, error, ms, 0, True, clock.blocked * 1000
            )
        hits = list(hits)[:k]
        return hits, SourceReport(
            src.name, src.kind, True, None, ms, len(hits), blocked_ms=clock.blocked * 1000
        )

    async def search(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> CompositeResult:
        """Fused hits from every source, plus a report per source."""
        if k <= 0 or not self.sources:
            return CompositeResult([], [])
        pool = max(k, self.rerank_top_n) if self.reranker is not None else k
        per_k = max(self.per_source_k or k, pool)
        results = list(
            await asyncio.gather(*(self._one(src, query, per_k, filters) for src in self.sources))
        )
        weights = {src.name: src.weight for src in self.sources}
        for _ in range(MAX_REFILLS):
            rankings = {
                src.name: hits for src, (hits, _) in zip(self.sources, results, strict=True)
            }
            hits = rrf_fuse(rankings, weights, k=self.rrf_k, limit=pool)
            # Passages that several documents share collapse into one hit: ask the
            # sources that filled their lists (they may hold more) for a deeper list,
            # within what is left of their timeouts, until k hits or nothing more.
            refill = [
                i
                for i, (found, report) in enumerate(results)
                if _may_hold_more(self.sources[i], found, report, per_k)
            ]
            if len(hits) >= k or not refill:
                break
            per_k = per_k * 2 + 4
            again = await asyncio.gather(
                *(self._one(self._rest(i, results[i][1]), query, per_k, filters) for i in refill)
            )
            for i, (found, report) in zip(refill, again, strict=True):
                spent = results[i][1].elapsed_ms + report.elapsed_ms
                results[i] = (
                    (found, replace(report, elapsed_ms=spent))
                    if report.ok
                    else (results[i][0], replace(results[i][1], elapsed_ms=spent))
                )
        else:
            rankings = {
                src.name: hits for src, (hits, _) in zip(self.sources, results, strict=True)
            }
            hits = rrf_fuse(rankings, weights, k=self.rrf_k, limit=pool)
        hits, rerank_report = await self._rerank(query, hits)
        return CompositeResult(hits[:k], [report for _, report in results], rerank_report)

    async def _rerank(
        self, query: str, hits: list[RetrievalHit]
    ) -> tuple[list[RetrievalHit], RerankReport | None]:
        """The fused hits reordered by the reranker, off the event loop and under the
        composite's timeout; a failure keeps the fused order and is reported."""
        reranker = self.reranker
        if reranker is None or len(hits) < 2:
            return hits, None
        start = time.perf_counter()
        top_n = self.rerank_top_n
        try:
            reranked = await asyncio.wait_for(
                asyncio.to_thread(rerank, reranker, query, hits, top_n),
                timeout=self.rerank_timeout,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken reranker degrades the ranking, never the turn
            ms = (time.perf_counter() - start) * 1000
            error = (
                f"timed out after {self.rerank_timeout:g}s"
                if isinstance(exc, asyncio.TimeoutError)
                else f"{type(exc).__name__}: {exc}"
            )
            return hits, RerankReport(reranker.name, False, error, ms, 0)
        ms = (time.perf_counter() - start) * 1000
        return reranked, RerankReport(reranker.name, True, None, ms, min(top_n, len(hits)))

    def _rest(self, i: int, report: SourceReport) -> RetrieverSource:
        """Source ``i`` with what is left of its timeout after ``report``."""
        src = self.sources[i]
        return replace(src, timeout=max(src.timeout - report.elapsed_ms / 1000, 0.001))

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        return (await self.search(query, k, filters)).hits

    async def close(self) -> None:
        for src in self.sources:
            try:
                await src.retriever.close()
            except Exception:  # closing one source must not leak the others
                continue
