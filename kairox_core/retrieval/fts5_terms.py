"""FTS5's own tokens and BM25, for an index that is not FTS5 (kairox-postgres's).

A keyword index that must rank like the SQLite one (``rag_fts``: ``porter unicode61
remove_diacritics 2``, ``bm25``) has to cut text into the very same terms. Rather than
re-implement unicode61's character classes, diacritic folding and the Porter stemmer,
``Fts5Terms`` asks FTS5 itself: the texts go into a small in-memory FTS5 table and the
terms come back through ``fts5vocab`` (instance). ``bm25`` is FTS5's formula
(``fts5_aux.c``: k1 1.2, b 0.75, an idf of at most zero clamped to 1e-6), so another
engine storing the per-chunk term frequencies, lengths and per-term document counts
computes the same scores.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kairox_core.retrieval.keyword_terms import choose_terms

FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"  # rag_fts's tokenizer (index.py)
BM25_K1 = 1.2
BM25_B = 0.75
IDF_FLOOR = 1e-6
# rag_fts rows also hold the workspace's token (column ws_token, weight 0): one more
# token in every row's length as FTS5's bm25 counts it
ROW_EXTRA_TOKENS = 1


@dataclass(frozen=True)
class TermCounts:
    """One text's terms: frequency per term and its length as bm25 counts it."""

    frequencies: dict[str, int]
    length: int


class Fts5Terms:
    """FTS5's tokenizer over an in-memory table; thread-safe (one lock)."""

    def __init__(self, tokenize: str = FTS_TOKENIZE) -> None:
        from kairox_core.store.connection import connect

        self._conn = connect(":memory:", vec=False)
        self._conn.execute(
            f"CREATE VIRTUAL TABLE w USING fts5(text, heading, tokenize='{tokenize}')"
        )
        self._conn.execute("CREATE VIRTUAL TABLE wv USING fts5vocab(w, 'instance')")
        self._lock = threading.Lock()

    def chunks(self, items: Sequence[tuple[str, str]]) -> list[TermCounts]:
        """Counts of (text, heading) pairs, as rows of ``rag_fts`` (both columns weigh 1)."""
        if not items:
            return []
        found: list[Counter[str]] = [Counter() for _ in items]
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(
                    "INSERT INTO w(rowid, text, heading) VALUES (?, ?, ?)",
                    [(i, t, h) for i, (t, h) in enumerate(items, start=1)],
                )
                for doc, term, n in self._conn.execute(
                    "SELECT doc, term, count(*) FROM wv GROUP BY doc, term"
                ):
                    found[int(doc) - 1][str(term)] = int(n)
            finally:
                self._conn.execute("ROLLBACK")  # the table is scratch: always left empty
        return [TermCounts(dict(c), sum(c.values()) + ROW_EXTRA_TOKENS) for c in found]

    def words(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """Each word's terms in order (a word the tokenizer splits, "foo_bar", has two)."""
        if not words:
            return []
        out: list[list[str]] = [[] for _ in words]
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(
                    "INSERT INTO w(rowid, text, heading) VALUES (?, ?, '')",
                    list(enumerate(words, start=1)),
                )
                for doc, term in self._conn.execute(
                    "SELECT doc, term FROM wv ORDER BY doc, offset"
                ):
                    out[int(doc) - 1].append(str(term))
            finally:
                self._conn.execute("ROLLBACK")
        return [tuple(t) for t in out]

    def close(self) -> None:
        self._conn.close()


def query_weights(stems: Iterable[tuple[str, ...]]) -> dict[str, int]:
    """Terms of a query (per word, from ``Fts5Terms.words``) and how many of its words
    have each: FTS5 scores a phrase per occurrence in the query, so a repeated stem
    ("deploy deployment") counts twice. A split word's parts are OR-ed here, where FTS5
    would match them as a phrase."""
    weights: Counter[str] = Counter()
    for parts in stems:
        weights.update(parts)
    return dict(weights)


def select_terms(
    words: Sequence[str], stems: Sequence[tuple[str, ...]], df: dict[str, int], rows: int
) -> list[int]:
    """Indexes of the words worth reading, as ``TermSelector.select`` chooses them
    (``keyword_terms.choose_terms``: the weightless ones in more than
    ``WEIGHTLESS_ROWS`` rows dropped, a word in at most ``CHEAP_ROWS`` rows kept, of
    the others the rarest up to ``MAX_TERMS``)."""
    if len(words) <= 1 or rows == 0:
        return list(range(len(words)))
    freq = [min((df.get(s, 0) for s in parts), default=0) for parts in stems]
    return choose_terms(freq, [len(parts) for parts in stems], rows)


def bm25_idf(rows: int, hits: int) -> float:
    """FTS5's idf: ln((N - n + 0.5) / (n + 0.5)), at most zero clamped to 1e-6."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else IDF_FLOOR


def bm25(tf: float, length: float, avg_length: float, idf: float) -> float:
    """One term's share of a row's score (positive: higher is better)."""
    return idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / avg_length))


__all__ = [
    "BM25_B",
    "BM25_K1",
    "FTS_TOKENIZE",
    "IDF_FLOOR",
    "ROW_EXTRA_TOKENS",
    "Fts5Terms",
    "TermCounts",
    "bm25",
    "bm25_idf",
    "query_weights",
    "select_terms",
]
