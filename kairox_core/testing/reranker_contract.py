"""Contract tests for rerankers: subclass ``RerankerContract``.

A subclass supplies ``make_reranker()``. Every reranker then satisfies the ``Reranker``
protocol, gives one finite score per passage in the passages' order, scores the
passage that answers the query above unrelated ones, is deterministic, takes an empty
batch, and works through ``rerank`` (the fused head reordered, the tail kept).
"""

from __future__ import annotations

import math

from kairox_core.retrieval.base import RetrievalHit
from kairox_core.retrieval.rerank import Reranker, rerank

RERANK_QUERY = "how does the moon make the tides"
ANSWER = "The moon's gravity pulls the oceans, which makes the tides rise and fall."
UNRELATED = (
    "Quartz is a hard mineral made of silicon and oxygen.",
    "Enzymes are proteins that speed up reactions inside cells.",
    "Magma rises through the crust and erupts as lava.",
)


class RerankerContract:
    """Subclass and implement ``make_reranker``."""

    def make_reranker(self) -> Reranker:
        raise NotImplementedError

    def test_is_a_reranker_with_a_name(self) -> None:
        reranker = self.make_reranker()
        assert isinstance(reranker, Reranker)
        assert isinstance(reranker.name, str) and reranker.name

    def test_one_finite_score_per_passage(self) -> None:
        texts = [*UNRELATED, ANSWER]
        scores = self.make_reranker().score(RERANK_QUERY, texts)
        assert len(scores) == len(texts)
        assert all(isinstance(s, int | float) and math.isfinite(s) for s in scores)

    def test_the_answer_scores_above_unrelated_passages(self) -> None:
        for at in range(len(UNRELATED) + 1):  # wherever it stands in the batch
            texts = list(UNRELATED)
            texts.insert(at, ANSWER)
            scores = self.make_reranker().score(RERANK_QUERY, texts)
            best = max(range(len(texts)), key=lambda i: scores[i])
            assert best == at, (at, scores)

    def test_deterministic(self) -> None:
        reranker = self.make_reranker()
        texts = [ANSWER, *UNRELATED]
        assert reranker.score(RERANK_QUERY, texts) == reranker.score(RERANK_QUERY, texts)

    def test_an_empty_batch(self) -> None:
        assert list(self.make_reranker().score(RERANK_QUERY, [])) == []

    def test_rerank_moves_the_answer_first_and_keeps_the_tail(self) -> None:
        texts = [*UNRELATED, ANSWER, "a tail passage beyond top_n"]
        hits = [RetrievalHit(t, 1.0 / (i + 1), "kb", f"d{i}") for i, t in enumerate(texts)]
        out = rerank(self.make_reranker(), RERANK_QUERY, hits, top_n=len(texts) - 1)
        assert out[0].text == ANSWER and out[0].metadata["fused_rank"] == len(UNRELATED) + 1
        assert out[-1] == hits[-1]  # beyond top_n: untouched
        assert sorted(h.doc_id for h in out) == sorted(h.doc_id for h in hits)
