"""Which words of a prompt the keyword search reads: the ones that can rank.

FTS5 reads the whole doclist of every term in a query and scores every row it
matches, so a long prompt of common words costs in proportion to the session's
length. Yet its bm25 gives a term found in half the rows or more an idf of 1e-6
(``idf <= 0`` is clamped): such a term barely changes a ranking and costs the most.
So before a keyword query the index looks up each term's document frequency. A
weightless term (in half the rows or more) in more than ``WEIGHTLESS_ROWS`` rows is
dropped; of the rest, a term in at most ``CHEAP_ROWS`` rows is always searched (its
doclist is short), and of the others the rarest are kept up to ``MAX_TERMS`` terms in
all, in the prompt's order. A keyword query's cost is then bounded by how rare its
words are, not by the length of the prompt or of the session. An index of at most
``WEIGHTLESS_ROWS`` rows searches every word (a tiny index's queries are unchanged).

Dropping a weightless term changes no score (its share of bm25 is ~0); it only leaves
out of the ranking's tail the rows that match nothing else. Weightless terms used to
be kept below 2,048 rows, where their bm25 cost more than the whole ``trim_messages``
baseline; dropping them there moved LoCoMo's evidence recall by about one turn either
way (the figures: docs/results.md).

Frequencies are the ones bm25 itself uses: global to the FTS table, per stem (the
table's own tokenizer stems a word through a small temporary FTS5 table). Counting a
term reads its doclist too, so counts are cached (per index) and counted again
once the table has grown by a quarter since (a word found nowhere is counted every
time: it may be the one the last turn just added); a cached count can only be stale
near the 50% line, where a term's idf is ~0 either side of it.

A common word's doclist is long, so counting it is slow on a long session, paid by
every prompt's new words and by a fresh connection's every word. So the
indexer's bulk and background runs store the counts of the common terms (in more
than ``WEIGHTLESS_ROWS`` rows) in ``rag_term_stats`` (``refresh_stats``: one pass over the
table's vocabulary, again once it has grown by a quarter). While they are that fresh,
a query reads its counts from them (a term not there was in few rows then: it is
searched, which only costs a little if it has become common since); otherwise it
counts live.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from kairox_core.store.connection import transaction
from kairox_core.usecache import UseCache

MAX_TERMS = 16  # a long prompt's keyword query keeps its rarest terms
CHEAP_ROWS = 2048  # a term in at most this many rows is always read (a short doclist)
WEIGHTLESS_ROWS = 256  # a weightless term in more rows than this is dropped
REFRESH_GROWTH = 1.25  # a cached count is stale once the table grew by this factor
# Query words (and stems) remembered: a miss is one SQL statement a search. A server
# meets new words every turn (numbers, names): a word no query asked for in
# ``_CACHE_LOOKUPS`` lookups (~300 turns of ``serve``, ~12 words a prompt) goes, so the
# caches stop growing within a few hundred turns (~180 bytes a word).
_CACHE_LIMIT = 4_096
_CACHE_CHARS = 200_000  # a pasted document's words as a prompt: ~8 characters a word
_CACHE_LOOKUPS = 4_096
# The common terms' counts as of a pass over the vocabulary (``refresh_stats``), and
# the table's size and ``weightless_floor()`` then (retrieval migration 6).
STATS_SCHEMA = """
CREATE TABLE rag_term_stats (term TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE rag_term_stats_meta (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    rows INTEGER NOT NULL,
    threshold INTEGER NOT NULL
);
"""


def weightless_floor() -> int:
    """The rows a weightless term must exceed to be dropped (and a stored count's)."""
    return min(WEIGHTLESS_ROWS, CHEAP_ROWS)


def choose_terms(freq: Sequence[int], parts: Sequence[int], rows: int) -> list[int]:
    """Indexes of the terms worth reading, given each one's document frequency (its
    rarest stem's), how many stems it has (a word the tokenizer splits, "foo_bar", is a
    phrase: never weightless here) and the rows of the table. A query whose every term
    is weightless keeps its rarest one."""
    floor = weightless_floor()
    kept = [i for i, f in enumerate(freq) if parts[i] > 1 or f <= floor or 2 * f < rows]
    if not kept and freq:  # all weightless: the rarest still orders rows by its use
        kept = [min(range(len(freq)), key=lambda i: freq[i])]
    cheap = [i for i in kept if freq[i] <= CHEAP_ROWS]
    costly = [i for i in kept if freq[i] > CHEAP_ROWS]
    room = max(0, MAX_TERMS - len(cheap))
    return sorted(set(cheap) | set(sorted(costly, key=lambda i: freq[i])[:room]))


class TermSelector:
    """Chooses the keyword terms of queries on one connection (and caches counts)."""

    def __init__(self, conn: Any, table: str, content: str, tokenize: str) -> None:
        self.conn = conn
        self.table = table
        self.content = content
        self.tokenize = tokenize
        self._ready = False
        self._stems: UseCache[str, tuple[str, ...]] = _term_cache()
        self._counts: UseCache[str, tuple[int, int]] = _term_cache()  # stem -> (rows, rows then)
        self._stored: dict[str, int] = {}  # rag_term_stats as last read
        self._stored_at: tuple[int, int] | None = None  # its (rows, threshold), None: not read
        self._lock = threading.Lock()

    def select(self, terms: Sequence[str]) -> list[str]:
        """The terms worth reading (``terms`` from ``query_terms``), in their order."""
        if len(terms) <= 1:
            return list(terms)
        with self._lock:
            rows = self._rows()
            if rows <= weightless_floor():  # no term can be in more rows: all are kept
                return list(terms)
            stems = self._stems_of(terms)
            counts = self._counts_of({s for t in terms for s in stems[t]}, rows)
        freq = [min((counts.get(s, 0) for s in stems[t]), default=0) for t in terms]
        keep = choose_terms(freq, [len(stems[t]) for t in terms], rows)
        return [terms[i] for i in keep]

    def _setup(self) -> None:
        """The temporary tables that stem query words."""
        if self._ready:
            return
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kx_query_words USING fts5("
            f"word, tokenize='{self.tokenize}')"
        )
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kx_query_stems "
            "USING fts5vocab(temp, kx_query_words, 'instance')"
        )
        self._ready = True

    def _vocabulary(self) -> str:
        """The temporary table of the FTS table's terms and their row counts."""
        name = f"temp.kx_{self.table}_rows"
        self.conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5vocab(main, {self.table}, 'row')"
        )
        return name

    def refresh_stats(self, *, force: bool = False) -> bool:
        """Store the common terms' counts (``rag_term_stats``: the terms in more than
        ``weightless_floor()`` rows) when they are missing or the table has grown by a
        quarter since (``force``: now); whether it did. For
        the writers' bulk and background runs, inside no transaction: it writes one,
        and it reads the whole vocabulary."""
        floor = weightless_floor()
        with self._lock:
            rows = self._rows()
            stored = self._read_meta()
            if not force:
                if stored is None and rows <= floor:
                    return False  # no term can be in more rows yet: nothing to store
                if stored is not None and stored[1] == floor and rows <= stored[0] * REFRESH_GROWTH:
                    return False  # fresh
            vocabulary = self._vocabulary()
            with transaction(self.conn):
                self.conn.execute("DELETE FROM rag_term_stats")
                self.conn.execute(
                    f"INSERT INTO rag_term_stats(term, docs) SELECT term, doc FROM {vocabulary} "
                    "WHERE doc > ?",
                    (floor,),
                )
                self.conn.execute(
                    "INSERT OR REPLACE INTO rag_term_stats_meta(one, rows, threshold) "
                    "VALUES (1, ?, ?)",
                    (rows, floor),
                )
            self._stored_at = None  # read again by the next query
            return True

    def _read_meta(self) -> tuple[int, int] | None:
        row = self.conn.execute("SELECT rows, threshold FROM rag_term_stats_meta").fetchone()
        return (int(row[0]), int(row[1])) if row is not None else None

    def _stored_counts(self, rows: int) -> dict[str, int] | None:
        """The stored counts while they are fresh for a table of ``rows`` rows (and were
        made with today's ``weightless_floor``), else None (count live)."""
        at = self._stored_at
        if at is None or rows > at[0] * REFRESH_GROWTH:  # another process may have stored
            meta = self._read_meta()
            if meta is None:
                self._stored = {}
            elif meta != at:
                found = self.conn.execute("SELECT term, docs FROM rag_term_stats")
                self._stored = {str(t): int(d) for t, d in found}
            self._stored_at = at = meta
        if at is None or at[1] != weightless_floor() or rows > at[0] * REFRESH_GROWTH:
            return None
        return self._stored

    def _rows(self) -> int:
        """An upper bound of the table's row count (its content's largest rowid)."""
        row = self.conn.execute(f"SELECT max(rowid) FROM {self.content}").fetchone()
        return int(row[0] or 0)

    def _stems_of(self, terms: Sequence[str]) -> dict[str, tuple[str, ...]]:
        # built from what was looked up: a put can turn the cache over, and a term
        # cached before would then be gone (a KeyError, a 500 in ``serve``)
        out: dict[str, tuple[str, ...]] = {}
        missing = []
        for t in terms:
            stems = self._stems.get(t)
            if stems is None:
                missing.append(t)
            else:
                out[t] = stems
        if missing:
            self._setup()
            self.conn.execute("DELETE FROM temp.kx_query_words")
            self.conn.executemany(
                "INSERT INTO temp.kx_query_words(rowid, word) VALUES (?, ?)",
                list(enumerate(missing, start=1)),
            )
            found: dict[int, list[str]] = {}
            for doc, term in self.conn.execute(
                "SELECT doc, term FROM temp.kx_query_stems ORDER BY doc, offset"
            ):
                found.setdefault(int(doc), []).append(str(term))
            for i, word in enumerate(missing, start=1):
                out[word] = tuple(found.get(i, ()))
                self._stems.put(word, out[word], len(word))
        return out

    def _counts_of(self, stems: set[str], rows: int) -> dict[str, int]:
        stored = self._stored_counts(rows)
        if stored is not None:
            return {s: stored.get(s, 0) for s in stems}
        out: dict[str, int] = {}
        stale = []
        for s in stems:
            cached = self._counts.get(s)
            # an absent word is counted again every time: it costs nothing and may be
            # the one the last turn just added
            if cached is None or cached[0] == 0 or rows > cached[1] * REFRESH_GROWTH:
                stale.append(s)
            else:
                out[s] = cached[0]
        if stale:
            vocabulary = self._vocabulary()
            fresh = dict.fromkeys(stale, 0)
            marks = ",".join("?" * len(stale))
            for term, doc in self.conn.execute(
                f"SELECT term, doc FROM {vocabulary} WHERE term IN ({marks})", stale
            ):
                fresh[str(term)] = int(doc)
            for stem, count in fresh.items():
                out[stem] = count
                self._counts.put(stem, (count, rows), len(stem))
        return out


def _term_cache() -> UseCache[str, Any]:
    return UseCache(_CACHE_LIMIT, _CACHE_CHARS, _CACHE_LOOKUPS)


__all__ = [
    "CHEAP_ROWS",
    "MAX_TERMS",
    "STATS_SCHEMA",
    "WEIGHTLESS_ROWS",
    "TermSelector",
    "choose_terms",
    "weightless_floor",
]
