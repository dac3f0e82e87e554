"""``TantivyRetriever``: one ``[knowledge_bases.<id>]`` of kind ``tantivy``.

Searches run in a worker thread (Tantivy releases the GIL) under the knowledge base's
timeout. Indexing writes every document of a run and commits once: a crash or an error
midway leaves the index as it was before the run.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import tantivy

from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.config import KnowledgeBaseConfig
from kairox_core.retrieval.base import (
    IndexProgress,
    IndexReport,
    RetrievalHit,
    RetrieverConfigError,
    RetrieverError,
    RetrieverTimeout,
)
from kairox_core.retrieval.threads import run_blocking
from kairox_tantivy import indexing
from kairox_tantivy import query as q
from kairox_tantivy.loader import IndexDoc
from kairox_tantivy.options import TantivyOptions, parse_options
from kairox_tantivy.store import FieldInfo, create_index, open_index, read_schema


class TantivyRetriever:
    """BM25 (title boosted over body) with snippets and term filters on stored fields."""

    capabilities = RetrieverCapabilities(index_files=True)

    def __init__(self, kb: KnowledgeBaseConfig, options: TantivyOptions | None = None) -> None:
        self.kb = kb
        self.name = kb.id
        self.options = options or parse_options(kb)
        self.timeout = kb.timeout
        self._lock = threading.RLock()
        self._index: tantivy.Index | None = None
        self._fields: dict[str, FieldInfo] = {}
        self._boosts = {
            self.options.title_field: self.options.title_boost,
            self.options.body_field: self.options.body_boost,
        }

    # --- opening -------------------------------------------------------------------

    def _opened(self) -> tantivy.Index:
        """The index, opened once; built from ``source_paths`` when it does not exist yet."""
        with self._lock:
            if self._index is None:
                path = self.options.path
                if not (path / "meta.json").exists() and self.options.source_paths:
                    report = self.index([])
                    if report.errors and not report.chunks:
                        raise RetrieverConfigError(
                            self.name,
                            "building the index from source_paths failed: "
                            + "; ".join(report.errors[:3]),
                        )
                else:
                    self._index = open_index(self.name, self.options)
                    self._fields = read_schema(path)
            return self._index  # type: ignore[return-value]  # set by both branches

    # --- searching -----------------------------------------------------------------

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        if k <= 0:
            return []
        if self._index is None:  # first use may build from source_paths: not under the timeout
            await asyncio.to_thread(self._opened)
        try:
            # a daemon thread: a search abandoned by the timeout never holds up exit
            return await asyncio.wait_for(
                run_blocking(self._search, query, k, filters), self.timeout
            )
        except asyncio.TimeoutError:
            raise RetrieverTimeout(
                self.name,
                f"the search took longer than the {self.timeout:g}s timeout "
                f"(raise timeout in [knowledge_bases.{self.name}])",
            ) from None

    def search(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        """The blocking search ``retrieve`` runs in a thread (usable directly from scripts)."""
        self._opened()
        return self._search(query, k, filters)

    def _search(self, text: str, k: int, filters: Mapping[str, Any] | None) -> list[RetrievalHit]:
        index = self._opened()
        opts = self.options
        try:
            query = q.text_query(index, text, self._boosts)
            if query is None:
                return []
            restrict = None
            if filters:
                restrict = q.filter_query(
                    self.name,
                    index.schema,
                    self._fields,
                    filters,
                    not_filterable=(opts.title_field, opts.body_field),
                )
            searcher = index.searcher()
            result = searcher.search(q.combine(query, restrict), k, count=False)
            snippets = None
            if opts.snippet_chars and result.hits:
                snippets = tantivy.SnippetGenerator.create(
                    searcher, query, index.schema, opts.body_field
                )
                snippets.set_max_num_chars(opts.snippet_chars)
            return [self._hit(searcher.doc(addr), score, snippets) for score, addr in result.hits]
        except RetrieverError:
            raise
        except (ValueError, OSError) as exc:
            raise RetrieverError(self.name, f"search failed: {exc}") from None

    def _hit(
        self, doc: tantivy.Document, score: float, snippets: tantivy.SnippetGenerator | None
    ) -> RetrievalHit:
        opts = self.options
        get = doc.get_first
        body = str(get(opts.body_field) or "")
        title = str(get(opts.title_field) or "")
        meta = get("meta") if "meta" in self._fields else None
        if isinstance(meta, dict):  # built by Kairox: the original metadata, as given
            metadata: dict[str, Any] = meta
        else:  # built elsewhere: every other stored field
            skip = {opts.body_field, opts.title_field, opts.id_field, opts.doc_id_field}
            metadata = {
                n: (v[0] if len(v) == 1 else v)
                for n, v in doc.to_dict().items()
                if n not in skip and v
            }
        metadata["title"] = title
        path = get("path") if "path" in self._fields else None
        if path:
            metadata["path"] = path
        if snippets is not None:
            metadata["snippet"] = (
                snippets.snippet_from_doc(doc).fragment() or body[: opts.snippet_chars]
            )
        doc_id = get(opts.doc_id_field) if opts.doc_id_field in self._fields else None
        if doc_id is None:
            doc_id = get(opts.id_field) if opts.id_field in self._fields else ""
        chunk_id = get("chunk_id") if "chunk_id" in self._fields else None
        return RetrievalHit(
            text=body or title,
            score=float(score),
            source=self.name,
            doc_id=str(doc_id),
            metadata=metadata,
            chunk_id=str(chunk_id) if chunk_id else None,
        )

    async def close(self) -> None:
        with self._lock:
            self._index = None

    # --- indexing ------------------------------------------------------------------

    def index(self, paths: Sequence[str], *, progress: IndexProgress | None = None) -> IndexReport:
        """``kairox kb index``: files under ``paths`` (else ``source_paths``) kept in step.

        New files are added, changed ones re-indexed, unchanged ones skipped, and files
        gone from under ``paths`` removed; one commit for the whole run.
        """
        targets = [str(p) for p in paths] or [str(p) for p in self.options.source_paths]
        if not targets:
            raise RetrieverError(
                self.name,
                "nothing to index: name files or directories "
                f"(`kairox kb index {self.name} PATH...`) or set "
                f"source_paths in [knowledge_bases.{self.name}]",
            )
        with self._lock:
            index = self._writable()
            return indexing.index_files(self.name, self.options, index, targets, progress)

    def add_documents(self, docs: Iterable[IndexDoc]) -> int:
        """Add (or replace, by key) documents given directly; one commit. Returns the count."""
        with self._lock:
            index = self._writable()
            return indexing.write(self.name, self.options, index, [(None, list(docs))])

    def _writable(self) -> tantivy.Index:
        if self._index is None:
            if (self.options.path / "meta.json").exists():
                self._index = open_index(self.name, self.options)
            else:
                self._index = create_index(self.name, self.options)
            self._fields = read_schema(self.options.path)
        return self._index


def make_retriever(
    kb: KnowledgeBaseConfig, options: TantivyOptions | None = None
) -> TantivyRetriever:
    """The registered factory (options validated by the core); the index opens on first use."""
    return TantivyRetriever(kb, options)
