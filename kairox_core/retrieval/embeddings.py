"""Embedding backends: the built-in feature-hashing backend and the registry loader.

``HashingEmbedding`` needs no model and no dependency: word unigrams and bigrams and
character n-grams are hashed (``zlib.crc32``, stable across processes, unlike
``hash()``) into a signed vector, which is L2-normalised. A batch is summed with
numpy (one ``bincount``) rather than in Python, since it is paid each turn by recall's
indexing of the last turn and by every query. It is the embedded default,
so a fresh install searches by meaning-ish similarity with nothing downloaded.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kairox_core.errors import KairoxUserError
from kairox_core.retrieval.base import EmbeddingBackend

if TYPE_CHECKING:
    from kairox_core.config import RetrievalSection

_WORD = re.compile(r"\w+", re.UNICODE)
_Sparse = tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]
DEFAULT_DIMENSION = 384


class QueryMemo:
    """The last few query vectors of one backend, by text. A turn embeds its prompt
    once per search that needs it (recall of past turns, long-term chunks, the
    workspace index): the same text, so the same vector, recomputed each time. Callers
    get a copy: a vector they change does not change the next caller's."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._vectors: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def get(self, text: str, embed: Callable[[str], list[float]]) -> list[float]:
        with self._lock:
            known = self._vectors.pop(text, None)
            if known is not None:
                self._vectors[text] = known  # the most recently used goes last
        if known is None:
            known = embed(text)
            with self._lock:
                if len(self._vectors) >= self.size:
                    del self._vectors[next(iter(self._vectors))]  # the least recently used
                self._vectors[text] = known
        return list(known)


# Words (and word pairs) whose features are remembered, the most recently used: an
# entry costs about 600 bytes (a pair: 200), and a long-running server meets new words
# every turn (numbers, names), so 200,000 each, as it was, could hold ~170 MB. Kept in
# two generations (``_Recent``), 16,384 embeds SciFact's 5,183 documents as fast as
# 200,000 did (5.2-5.6 s against 5.2-5.4 s, same run; 8,192: 6.2-6.4 s), in ~13 MB.
CACHE_SIZE = 16_384


class _Recent:
    """A cache in two generations: ``newer`` (a plain dict, looked into first: the hot
    path) and ``older``, looked into on a miss, what is found there moving up. Once
    ``newer`` holds half of ``size`` entries it becomes ``older`` and the oldest is
    dropped: at most ``size`` entries, the recently used kept (LRU-like, without
    reordering on every hit)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.newer: dict[Any, Any] = {}
        self.older: dict[Any, Any] = {}
        # after this many lookups ``newer`` turns over even if not full: a word no text
        # brought for that long goes, so a long-running server's cache stops growing
        # within a few hundred turns instead of filling to ``size`` (issue 27)
        self.span = 2 * size
        self.seen = 0

    def touch(self, lookups: int) -> None:
        """Count lookups made straight into ``newer`` (the hot path)."""
        self.seen += lookups
        if self.seen >= self.span:
            self.seen = 0
            self.older, self.newer = self.newer, {}

    def recall(self, key: Any) -> Any:
        """The value of ``key`` from either generation (moved up), or None."""
        self.touch(1)
        value = self.newer.get(key)
        if value is None:
            value = self.older.pop(key, None)
            if value is not None:
                self.put(key, value)
        return value

    def put(self, key: Any, value: Any) -> None:
        if self.size <= 0:
            return
        if len(self.newer) >= max(self.size // 2, 1):
            self.older, self.newer = self.newer, {}
        self.newer[key] = value

    def __len__(self) -> int:
        return len(self.newer) + len(self.older)


class HashingEmbedding:
    """Deterministic feature hashing of word uni/bigrams and character n-grams."""

    name = "hashing"

    def __init__(
        self,
        dimension: int = DEFAULT_DIMENSION,
        *,
        char_ngrams: Sequence[int] = (3, 4),
        bigram_weight: float = 0.5,
        char_weight: float = 0.35,
        batch_size: int = 256,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        if dimension < 8:
            raise KairoxUserError(f"hashing embedding dimension must be >= 8 (got {dimension})")
        self.dimension = int(dimension)
        self.char_ngrams = tuple(int(n) for n in char_ngrams)
        self.bigram_weight = float(bigram_weight)
        self.char_weight = float(char_weight)
        self.batch_size = int(batch_size)
        # word -> its sparse contribution (unigram + its character n-grams)
        self._word_cache = _Recent(cache_size)
        self._pair_cache = _Recent(cache_size)
        self._queries = QueryMemo()

    def _feature(self, key: str) -> tuple[int, float]:
        h = zlib.crc32(key.encode("utf-8"))
        sign = 1.0 if (h >> 31) & 1 else -1.0
        return h % self.dimension, sign

    def _word_features(self, word: str) -> _Sparse:
        """A word's sparse contribution (unigram plus its character n-grams), as
        (indices, values) arrays: cached, a session repeats its words."""
        cached: _Sparse | None = self._word_cache.recall(word)
        if cached is not None:
            return cached
        acc: dict[int, float] = {}
        idx, sign = self._feature("w:" + word)
        acc[idx] = acc.get(idx, 0.0) + sign
        padded = f"<{word}>"
        grams = [
            padded[i : i + n] for n in self.char_ngrams for i in range(max(1, len(padded) - n + 1))
        ]
        if grams:
            weight = self.char_weight / math.sqrt(len(grams))
            for gram in grams:
                idx, sign = self._feature("c:" + gram)
                acc[idx] = acc.get(idx, 0.0) + sign * weight
        features = (
            np.fromiter(acc.keys(), dtype=np.intp, count=len(acc)),
            np.fromiter(acc.values(), dtype=np.float64, count=len(acc)),
        )
        self._word_cache.put(word, features)
        return features

    def _pair_feature(self, pair: tuple[str, str]) -> int:
        """A bigram's feature as one int, ``±(index + 1)`` (the sign is the feature's);
        cached like words: each turn is embedded again as the next one's context."""
        known: int | None = self._pair_cache.recall(pair)
        if known is not None:
            return known
        idx, sign = self._feature("b:" + " ".join(pair))
        signed = idx + 1 if sign > 0 else -(idx + 1)
        self._pair_cache.put(pair, signed)
        return signed

    def _embed_many(self, texts: Sequence[str]) -> list[list[float]]:
        """One ``bincount`` for the whole batch: row ``r``'s features go to bins
        ``r * dimension + index``, added in the order the per-text loop used to add
        them (words, then bigrams), so each sum is the same float sum as before."""
        dim = self.dimension
        idx_parts: list[npt.NDArray[np.intp]] = []
        val_parts: list[npt.NDArray[np.float64]] = []
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            if not words:
                continue
            base = row * dim
            counts = Counter(words)
            feats = [self._word_features(w) for w in counts]
            sizes = [len(f[0]) for f in feats]
            # sublinear term frequency (sqrt): a word repeated 20 times must not drown the rest
            tf = np.sqrt(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
            idx_parts.append(np.concatenate([f[0] for f in feats]) + base)
            val_parts.append(np.concatenate([f[1] for f in feats]) * np.repeat(tf, sizes))
            if self.bigram_weight and len(words) > 1:
                pairs = Counter(itertools.pairwise(words))
                self._pair_cache.touch(len(pairs))
                known = self._pair_cache.newer
                signed = [known.get(p) or self._pair_feature(p) for p in pairs]
                bidx = np.fromiter(signed, dtype=np.intp, count=len(signed))
                sign = np.where(bidx > 0, 1.0, -1.0)
                pf = np.sqrt(np.fromiter(pairs.values(), dtype=np.float64, count=len(pairs)))
                idx_parts.append(np.abs(bidx) - 1 + base)
                val_parts.append(sign * self.bigram_weight * pf)
        n = len(texts)
        if not idx_parts:
            return [[0.0] * dim for _ in range(n)]
        flat = np.bincount(
            np.concatenate(idx_parts), weights=np.concatenate(val_parts), minlength=n * dim
        )
        vecs = flat.reshape(n, dim)
        norms = np.sqrt(np.einsum("ij,ij->i", vecs, vecs))
        inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms != 0.0)
        out: list[list[float]] = (vecs * inv[:, None]).tolist()
        return out

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._embed_many(texts[start : start + self.batch_size]))
        return out

    def embed_query(self, text: str) -> list[float]:
        return self._queries.get(text, lambda t: self._embed_many([t])[0])


def load_embedding_backend(
    config_or_name: str | RetrievalSection,
    options: Mapping[str, Any] | None = None,
    *,
    options_key: str = "retrieval.backend_options",
) -> EmbeddingBackend:
    """Build a backend from the registry by name, or from a ``RetrievalSection``.

    ``config_or_name`` is a backend name or anything with ``backend`` and
    ``backend_options`` (the ``[retrieval]`` section); ``options`` override the latter.
    ``options_key`` is where the options come from, for errors (a knowledge base's
    ``embedding_options``, say).
    One backend per (factory, options) per process (``warm``): a model loads once.
    """
    from kairox_core.plugins import EMBEDDING_BACKENDS, get_plugins
    from kairox_core.retrieval.warm import options_key as warm_key
    from kairox_core.retrieval.warm import warm

    if isinstance(config_or_name, str):
        name, opts = config_or_name, dict(options or {})
    else:
        name = config_or_name.backend
        opts = {**dict(config_or_name.backend_options), **dict(options or {})}
    reg = get_plugins().get(EMBEDDING_BACKENDS, name, context="retrieval.backend")
    try:
        if reg.options is None:
            backend = warm(
                ("embedding_backends", name, reg.factory, warm_key(opts)),
                lambda: reg.factory(**opts),
            )
        else:
            from kairox_core.plugin_options import validate_options

            validated = validate_options(reg.options, opts, key=options_key)
            backend = warm(
                ("embedding_backends", name, reg.factory, warm_key(opts)),
                lambda: reg.factory(options=validated),
            )
    except TypeError as exc:
        raise KairoxUserError(
            f"{options_key}: embedding backend '{name}' rejected its options: {exc}"
        ) from None
    if not isinstance(backend, EmbeddingBackend):
        raise KairoxUserError(
            f"embedding backend '{name}' (plugin {reg.plugin}) did not return an EmbeddingBackend"
        )
    return backend
