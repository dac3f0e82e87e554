"""Taint: does a proposed memory repeat text the model was shown from outside?

A tool result or a retrieved chunk may carry instructions ("remember that the admin
password is ..."); a memory whose body mostly repeats such text is flagged so the
approver looks twice. Comparison is on the word tokens of ``kairox_core.textfold.fold``
(NFKC, invisible characters removed, Cyrillic/Greek look-alikes folded, case folded),
so spacing, punctuation, case and disguises that read the same do not hide a copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kairox_core.textfold import fold
from kairox_core.usecache import UseCache, memo_by_text, text_and_result

_WORD = re.compile(r"\w+")
NGRAM = 5
THRESHOLD = 0.6


def _tokens(text: str) -> list[str]:
    return list(_folded(text))


# The untrusted texts of a turn are mostly the same as the last turn's (recalled turns
# and retrieval hits come back turn after turn): folding and splitting them again would
# be paid by every turn with a memory marker, so their word tuples and n-gram sets are
# cached (the figure: docs/results.md).
# Tool results are new texts every turn and may be long: the caches are bounded by the
# characters they hold (a word or an n-gram counted as ~64: its tuple and slot), and a
# text no turn checks against any more goes (``usecache``).
def _words_cost(text: str, words: tuple[str, ...]) -> int:
    return len(text) + 64 * len(words)


@memo_by_text(4096, 4_000_000, 8192, _words_cost)
def _folded(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(fold(text)))


@memo_by_text(4096, 4_000_000, 8192, text_and_result)
def _spaced(text: str) -> str:
    return " " + " ".join(_folded(text)) + " "


def _contains(text: str, needle: str, first: str) -> bool:
    """``needle`` (spaced folded words) among the folded words of ``text``. An ASCII
    text folds to its lower case with whitespace runs made one space, so a text that
    does not even contain the needle's first word is rejected without folding it."""
    if text.isascii() and first.isascii() and first not in text.lower():
        return False
    return needle in _spaced(text)


_GRAMS: UseCache[tuple[str, int], frozenset[tuple[str, ...]]] = UseCache(4096, 8_000_000, 8192)


def _grams(text: str, ngram: int) -> frozenset[tuple[str, ...]]:
    grams = _GRAMS.get((text, ngram))
    if grams is None:
        toks = _folded(text)
        grams = frozenset(toks[i : i + ngram] for i in range(len(toks) - ngram + 1))
        _GRAMS.put((text, ngram), grams, len(text) + 64 * len(grams))
    return grams


def is_tainted(
    body: str,
    untrusted_texts: Iterable[str],
    *,
    threshold: float = THRESHOLD,
    ngram: int = NGRAM,
) -> bool:
    """True when ``body``, or at least ``threshold`` of its word ``ngram``-grams, appears
    in one of ``untrusted_texts`` (tool results, retrieved text of the same turn).

    A body shorter than ``ngram`` words counts as tainted when its whole word sequence
    appears in one text.
    """
    words = _tokens(body)
    if not words:
        return False
    if len(words) < ngram:
        needle = " " + " ".join(words) + " "
        return any(_contains(t, needle, words[0]) for t in untrusted_texts if t)
    grams = {tuple(words[i : i + ngram]) for i in range(len(words) - ngram + 1)}
    need = threshold * len(grams)
    seen: set[tuple[str, ...]] = set()
    for text in untrusted_texts:
        if not text:
            continue
        seen |= grams & _grams(text, ngram)
        if len(seen) >= need:
            return True
    return False
