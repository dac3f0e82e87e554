"""The built-in ``hashing`` embedding backend and the registry loader."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core.errors import KairoxUserError, UnknownNameError
from kairox_core.retrieval.base import EmbeddingBackend
from kairox_core.retrieval.embeddings import (
    CACHE_SIZE,
    HashingEmbedding,
    QueryMemo,
    load_embedding_backend,
)
from kairox_core.testing.contracts import EmbeddingBackendContract


class TestHashingContract(EmbeddingBackendContract):
    def make_backend(self) -> EmbeddingBackend:
        return HashingEmbedding()


class TestHashingFromRegistryContract(EmbeddingBackendContract):
    def make_backend(self) -> EmbeddingBackend:
        return load_embedding_backend("hashing", {"dimension": 128})


def test_dimension_is_configurable_and_recorded() -> None:
    backend = load_embedding_backend("hashing", {"dimension": 64})
    assert backend.name == "hashing" and backend.dimension == 64
    assert len(backend.embed_query("hello world")) == 64


def test_loader_reads_the_retrieval_section() -> None:
    from kairox_core.config import parse_config

    config = parse_config(
        {"retrieval": {"backend": "hashing", "backend_options": {"dimension": 96}}}
    )
    assert load_embedding_backend(config.retrieval).dimension == 96


@pytest.mark.slow
def test_stable_across_processes() -> None:
    """crc32, not Python's salted hash(): vectors survive a restart."""
    code = (
        "from kairox_core.retrieval.embeddings import HashingEmbedding;"
        "print(HashingEmbedding(32).embed_query('stable vectors across runs'))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1
    assert outs.pop().strip() == str(HashingEmbedding(32).embed_query("stable vectors across runs"))


def test_empty_text_is_a_zero_vector() -> None:
    assert HashingEmbedding(16).embed_query("  ...  ") == [0.0] * 16


def test_shared_words_and_morphology_bring_texts_closer() -> None:
    b = HashingEmbedding()
    q = b.embed_query("indexing documents")
    near, far = b.embed_documents(["an index of the document", "volcanic lava flows"])
    assert sum(x * y for x, y in zip(q, near, strict=True)) > sum(
        x * y for x, y in zip(q, far, strict=True)
    )


def test_unknown_backend_names_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    from kairox_core.plugins import reset_plugins

    monkeypatch.setenv("KAIROX_LOAD_PLUGINS", "")  # built-ins only, whatever is installed
    reset_plugins()
    try:
        with pytest.raises(UnknownNameError, match="pip install kairox-sentence-transformers"):
            load_embedding_backend("sentence-transformers")
        with pytest.raises(UnknownNameError, match="use one of: hashing"):
            load_embedding_backend("no-such-backend")
    finally:
        monkeypatch.delenv("KAIROX_LOAD_PLUGINS")
        reset_plugins()


def test_bad_options_are_a_user_error() -> None:
    with pytest.raises(KairoxUserError, match="did you mean 'dimension'") as info:
        load_embedding_backend("hashing", {"dimensions": 12})
    assert "retrieval.backend_options.dimensions" in str(info.value)
    with pytest.raises(KairoxUserError, match="greater than or equal to 8"):
        load_embedding_backend("hashing", {"dimension": 2})


def _reference_embedding(b: HashingEmbedding, text: str) -> list[float]:
    """The pure-Python implementation the numpy one replaced, kept as the oracle."""
    import itertools
    import math
    import re
    import zlib
    from collections import Counter

    def feature(key: str) -> tuple[int, float]:
        h = zlib.crc32(key.encode("utf-8"))
        return h % b.dimension, 1.0 if (h >> 31) & 1 else -1.0

    def word_features(word: str) -> list[tuple[int, float]]:
        acc: dict[int, float] = {}
        idx, sign = feature("w:" + word)
        acc[idx] = acc.get(idx, 0.0) + sign
        padded = f"<{word}>"
        grams = [
            padded[i : i + n] for n in b.char_ngrams for i in range(max(1, len(padded) - n + 1))
        ]
        if grams:
            weight = b.char_weight / math.sqrt(len(grams))
            for gram in grams:
                idx, sign = feature("c:" + gram)
                acc[idx] = acc.get(idx, 0.0) + sign * weight
        return list(acc.items())

    vec = [0.0] * b.dimension
    words = re.findall(r"\w+", text.lower())
    for word, count in Counter(words).items():
        for idx, value in word_features(word):
            vec[idx] += value * math.sqrt(count)
    if b.bigram_weight and len(words) > 1:
        for pair, count in Counter(itertools.pairwise(words)).items():
            idx, sign = feature("b:" + " ".join(pair))
            vec[idx] += sign * b.bigram_weight * math.sqrt(count)
    norm = math.sqrt(sum(x * x for x in vec))
    return vec if norm == 0.0 else [x * (1.0 / norm) for x in vec]


_texts = st.lists(
    st.lists(
        st.sampled_from([*"ab cd éß 1_.\n-", "word", "WORD", "ab ab", "Ünïcode"]), max_size=40
    ).map("".join),
    max_size=6,
)


@pytest.mark.slow
@given(texts=_texts, dimension=st.sampled_from([8, 31, 384]), batch=st.sampled_from([1, 2, 256]))
def test_vectors_equal_the_pure_python_reference(
    texts: list[str], dimension: int, batch: int
) -> None:
    b = HashingEmbedding(dimension, batch_size=batch)
    got = b.embed_documents(texts)
    assert len(got) == len(texts)
    for text, vec in zip(texts, got, strict=True):
        want = _reference_embedding(b, text)
        assert len(vec) == dimension and all(isinstance(x, float) for x in vec)
        assert max((abs(x - y) for x, y in zip(vec, want, strict=True)), default=0.0) <= 1e-9
        # the same whether embedded alone, as a query, or again (word cache warm)
        assert b.embed_query(text) == vec
    assert b.name == "hashing" and b.dimension == dimension


def test_known_vector_is_unchanged() -> None:
    """A fixed text against the reference with non-default weights and n-grams."""
    b = HashingEmbedding(64, char_ngrams=(2, 5), bigram_weight=0.0, char_weight=1.0)
    text = "Repeated repeated words, words; and numbers 42 42 42"
    assert (
        max(
            abs(x - y)
            for x, y in zip(b.embed_query(text), _reference_embedding(b, text), strict=True)
        )
        <= 1e-9
    )


def test_a_query_is_embedded_once_and_each_caller_gets_its_own_copy() -> None:
    """Recall, long-term memory and the workspace index embed the same prompt in one
    turn: the backend remembers its last few queries (``QueryMemo``), and hands out
    copies, so a caller changing its vector changes nobody else's."""
    backend = HashingEmbedding()
    first = backend.embed_query("when is the release due?")
    assert first == backend._embed_many(["when is the release due?"])[0]
    first[0] += 1.0
    again = backend.embed_query("when is the release due?")
    assert again == backend._embed_many(["when is the release due?"])[0] and again is not first
    calls: list[str] = []
    memo = QueryMemo(size=2)
    for text in ["a", "b", "a", "c", "a", "b"]:
        memo.get(text, lambda t: calls.append(t) or [float(len(calls))])
    assert calls == [
        "a",
        "b",
        "c",
        "b",
    ]  # two remembered, the least recently used goes: "b" when "c" came


def test_word_caches_stay_within_their_bound_as_new_words_keep_coming() -> None:
    """A server meets new words every turn (numbers, names): the word and word-pair
    caches stop at ``cache_size`` (then start over), and a vector is the same whether
    its words were cached or not."""
    emb = HashingEmbedding(dimension=64, cache_size=50)
    fresh = HashingEmbedding(dimension=64, cache_size=0)
    for turn in range(200):
        text = f"turn {turn} about week {turn // 7} and item-{turn * 31}"
        assert emb.embed_documents([text]) == fresh.embed_documents([text])
        assert len(emb._word_cache) <= 50 and len(emb._pair_cache) <= 50  # both generations
    # the registry's default is the module's (whose comment says what an entry costs)
    loaded = load_embedding_backend("hashing", {})
    assert isinstance(loaded, HashingEmbedding)
    assert loaded._word_cache.size == HashingEmbedding()._word_cache.size == CACHE_SIZE


def test_word_caches_drop_words_no_text_brings_any_more() -> None:
    """Far below ``cache_size``: the caches turn over every ``2 x cache_size``
    lookups, so a long session's one-off words (numbers) go while its common words
    stay (issue 27: the caches filled to their cap over ~5,000 turns of serve)."""
    emb = HashingEmbedding(dimension=64, cache_size=1000)
    fresh = HashingEmbedding(dimension=64, cache_size=0)
    for turn in range(3000):
        text = f"what about the roses in week {turn}"
        assert emb.embed_documents([text]) == fresh.embed_documents([text])
    assert "roses" in emb._word_cache.newer or "roses" in emb._word_cache.older
    assert "5" not in emb._word_cache.newer and "5" not in emb._word_cache.older
    # 7 word lookups a text: one span is ~285 texts, so at most ~2 x 285 numbers held
    assert len(emb._word_cache) <= 6 + 2 * (2000 // 7 + 1)
    assert len(emb._pair_cache) <= 5 + 2 * (2000 // 6 + 1)
