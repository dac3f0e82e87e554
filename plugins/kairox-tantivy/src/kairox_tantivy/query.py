"""User text -> a Tantivy query that never raises: BM25 over title and body, plus filters.

Tantivy's query parser has a syntax (``field:``, quotes, ``+``/``-``, ``AND``, ``^``...)
that ordinary questions trip over. The user's text is reduced to its words (what the
tokenizer would keep anyway), lower-cased so ``AND``/``OR``/``NOT`` are plain words,
and only then parsed, with the title boosted over the body.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import tantivy

from kairox_core.retrieval.base import RetrieverError
from kairox_tantivy.store import FieldInfo

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
MAX_QUERY_WORDS = 512


def query_words(text: str) -> list[str]:
    """The searchable words of ``text``, in order (at most ``MAX_QUERY_WORDS``)."""
    return _WORD.findall(text.lower())[:MAX_QUERY_WORDS]


def text_query(
    index: tantivy.Index, text: str, fields: Mapping[str, float]
) -> tantivy.Query | None:
    """A BM25 query over ``fields`` (name -> boost), or None when ``text`` has no words."""
    words = query_words(text)
    if not words:
        return None
    return index.parse_query(" ".join(words), list(fields), field_boosts=dict(fields))


def _coerce(info: FieldInfo, value: Any) -> Any:
    """A filter value as the field's term type; text is matched as the tokenizer stores it."""
    if info.type == "text":
        text = value if isinstance(value, str) else str(value)
        return text if info.tokenizer == "raw" else text.lower()
    if info.type in ("i64", "u64"):
        return int(value)
    if info.type == "f64":
        return float(value)
    if info.type == "bool":
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes")
        return bool(value)
    return value


def filter_query(
    kb_id: str,
    schema: tantivy.Schema,
    fields: Mapping[str, FieldInfo],
    filters: Mapping[str, Any],
    not_filterable: Sequence[str] = (),
) -> tantivy.Query | None:
    """Term queries, all required: ``{"field": value}`` or ``{"field": [any, of, these]}``."""
    clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []
    for name, wanted in filters.items():
        info = fields.get(name)
        if info is None or not info.indexed or name in not_filterable or info.type == "json_object":
            usable = sorted(
                n
                for n, f in fields.items()
                if f.indexed and n not in not_filterable and f.type != "json_object"
            )
            raise RetrieverError(
                kb_id,
                f"cannot filter on '{name}': it is not a stored field of the index "
                f"(filterable: {', '.join(usable) or 'none'}); add it to stored_fields "
                f"and rebuild the index",
            )
        values = list(wanted) if isinstance(wanted, (list, tuple, set, frozenset)) else [wanted]
        try:
            terms = [_coerce(info, v) for v in values]
        except (TypeError, ValueError):
            raise RetrieverError(
                kb_id, f"filter {name}={wanted!r} does not fit the field's type {info.type}"
            ) from None
        if not terms:
            return tantivy.Query.empty_query()  # "one of nothing" matches nothing
        query = (
            tantivy.Query.term_query(schema, name, terms[0])
            if len(terms) == 1
            else tantivy.Query.term_set_query(schema, name, terms)
        )
        clauses.append((tantivy.Occur.Must, query))
    if not clauses:
        return None
    return clauses[0][1] if len(clauses) == 1 else tantivy.Query.boolean_query(clauses)


def combine(text: tantivy.Query, filters: tantivy.Query | None) -> tantivy.Query:
    """Filters restrict without scoring: BM25 scores stay those of the text query."""
    if filters is None:
        return text
    return tantivy.Query.boolean_query(
        [
            (tantivy.Occur.Must, text),
            (tantivy.Occur.Must, tantivy.Query.const_score_query(filters, 0.0)),
        ]
    )
