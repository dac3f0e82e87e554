"""Turning user text into an FTS5 query that can never be a syntax error.

A prompt may contain quotes, ``NEAR``, ``*``, ``-``, ``AND/OR/NOT``, parentheses,
``^`` or ``:``; all are FTS5 syntax. We keep only word tokens and quote each one, so
the query is a plain OR of terms ranked by bm25.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_TOKEN = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 64


def query_terms(text: str, *, max_terms: int = MAX_TERMS) -> list[str]:
    """Distinct word tokens of ``text``, lowercased, in first-seen order."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(text.lower()):
        seen.setdefault(token, None)
        if len(seen) >= max_terms:
            break
    return list(seen)


def fts_match_expression(text: str, *, columns: list[str] | None = None) -> str | None:
    """A safe FTS5 MATCH expression (an OR of quoted terms); None when there is no word."""
    return terms_expression(query_terms(text), columns=columns)


def terms_expression(terms: Sequence[str], *, columns: list[str] | None = None) -> str | None:
    """The MATCH expression for ``terms`` (from ``query_terms``); None when empty."""
    if not terms:
        return None
    body = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    if columns:
        cols = " ".join('"' + c.replace('"', '""') + '"' for c in columns)
        return "{" + cols + "} : (" + body + ")"
    return body
