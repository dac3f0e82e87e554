"""``TantivyRetriever``: one ``[knowledge_bases.<id>]`` of kind ``tantivy``.

Searches run in a worker thread (Tantivy releases the GIL) under the knowledge base's
timeout. Indexing writes every document of a run and commits once: a crash or an error
midway leaves the index as it was before the run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tantivy

from kairox_core.config import KnowledgeBaseConfig
from kairox_core.retrieval.base import RetrievalHit, RetrieverError, RetrieverTimeout
from kairox_tantivy import query as q
from kairox_tantivy.loader import IndexDoc, expand_paths, load_file
from kairox_tantivy.options import TantivyOptions, parse_options
from kairox_tantivy.store import FieldInfo, create_index, open_index, read_schema

WRITER_HEAP_BYTES = 64_000_000
Progress = Callable[[int, int], Any]


@dataclass
class IndexReport:
    """What one indexing run did."""

    knowledge_base: str
    files: int = 0
    documents: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    seconds: float = 0.0

    def summary(self) -> str:
        text = (f"knowledge base '{self.knowledge_base}': indexed {self.documents} documents "
                f"from {self.files} files in {self.seconds:.1f}s")
        if self.failed:
            text += f"; {len(self.failed)} files failed: " + "; ".join(
                f"{p}: {r}" for p, r in self.failed[:5])
        return text


class TantivyRetriever:
    """BM25 (title boosted over body) with snippets and term filters on stored fields."""

    def __init__(self, kb: KnowledgeBaseConfig, options: TantivyOptions | None = None) -> None:
        self.kb = kb
        self.name = kb.id
        self.options = options or parse_options(kb)
        self.timeout = kb.timeout
        self._lock = threading.RLock()
        self._index: tantivy.Index | None = None
        self._fields: dict[str, FieldInfo] = {}
        self._boosts = {self.options.title_field: self.options.title_boost,
                        self.options.body_field: self.options.body_boost}

    # --- opening -------------------------------------------------------------------

    def _opened(self) -> tantivy.Index:
        """The index, opened once; built from ``source_paths`` when it does not exist yet."""
        with self._lock:
            if self._index is None:
                path = self.options.path
                if not (path / "meta.json").exists() and self.options.source_paths:
                    self._build(list(self.options.source_paths), None)
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
        await asyncio.to_thread(self._opened)  # first use may build: not under the timeout
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(self._search, query, k, filters), self.timeout
            )
        except asyncio.TimeoutError:
            raise RetrieverTimeout(
                self.name, f"the search took longer than the {self.timeout:g}s timeout "
                           f"(raise timeout in [knowledge_bases.{self.name}])"
            ) from None

    def search(self, query: str, k: int,
               filters: Mapping[str, Any] | None = None) -> list[RetrievalHit]:
        """The blocking search ``retrieve`` runs in a thread (usable directly from scripts)."""
        self._opened()
        return self._search(query, k, filters)

    def _search(self, text: str, k: int,
                filters: Mapping[str, Any] | None) -> list[RetrievalHit]:
        index = self._opened()
        opts = self.options
        try:
            query = q.text_query(index, text, self._boosts)
            if query is None:
                return []
            restrict = None
            if filters:
                restrict = q.filter_query(self.name, index.schema, self._fields, filters,
                                          not_filterable=(opts.title_field, opts.body_field))
            searcher = index.searcher()
            result = searcher.search(q.combine(query, restrict), k)
            snippets = None
            if opts.snippet_chars and result.hits:
                snippets = tantivy.SnippetGenerator.create(
                    searcher, query, index.schema, opts.body_field)
                snippets.set_max_num_chars(opts.snippet_chars)
            return [self._hit(searcher.doc(addr), score, snippets) for score, addr in result.hits]
        except RetrieverError:
            raise
        except (ValueError, OSError) as exc:
            raise RetrieverError(self.name, f"search failed: {exc}") from None

    def _hit(self, doc: tantivy.Document, score: float,
             snippets: tantivy.SnippetGenerator | None) -> RetrievalHit:
        opts = self.options
        stored = doc.to_dict()
        first = {name: values[0] for name, values in stored.items() if values}
        body = str(first.get(opts.body_field, ""))
        title = str(first.get(opts.title_field, ""))
        meta = first.get("meta")
        if isinstance(meta, dict):  # built by Kairox: the original metadata, as given
            metadata: dict[str, Any] = dict(meta)
        else:  # built elsewhere: every other stored field
            skip = {opts.body_field, opts.title_field, opts.id_field, opts.doc_id_field}
            metadata = {n: (v[0] if len(v) == 1 else v)
                        for n, v in stored.items() if n not in skip and v}
        metadata["title"] = title
        if first.get("path"):
            metadata["path"] = first["path"]
        if snippets is not None:
            metadata["snippet"] = snippets.snippet_from_doc(doc).fragment() or body[
                : opts.snippet_chars]
        doc_id = str(first.get(opts.doc_id_field, first.get(opts.id_field, "")))
        chunk_id = first.get("chunk_id") or None
        return RetrievalHit(text=body or title, score=float(score), source=self.name,
                            doc_id=doc_id, metadata=metadata,
                            chunk_id=str(chunk_id) if chunk_id else None)

    async def close(self) -> None:
        with self._lock:
            self._index = None

    # --- indexing ------------------------------------------------------------------

    def index(self, paths: Sequence[str | Path] = (), *,
              progress: Progress | None = None) -> IndexReport:
        """Index files (``source_paths`` when none are given); replaces what they gave before.

        ``progress(done, total)`` is called after each file.
        """
        targets = [Path(p) for p in paths] or list(self.options.source_paths)
        if not targets:
            raise RetrieverError(self.name, "nothing to index: name files or directories, or "
                                            f"set source_paths in [knowledge_bases.{self.name}]")
        with self._lock:
            return self._build(targets, progress)

    def add_documents(self, docs: Iterable[IndexDoc]) -> int:
        """Add (or replace, by key) documents given directly; one commit. Returns the count."""
        with self._lock:
            index = self._writable()
            return self._write(index, [(None, list(docs))])

    def _writable(self) -> tantivy.Index:
        if self._index is None:
            if (self.options.path / "meta.json").exists():
                self._index = open_index(self.name, self.options)
            else:
                self._index = create_index(self.name, self.options)
            self._fields = read_schema(self.options.path)
        return self._index

    def _build(self, targets: list[Path], progress: Progress | None) -> IndexReport:
        started = time.perf_counter()
        report = IndexReport(self.name)
        try:
            files = expand_paths(targets, self.options.extensions)
        except FileNotFoundError as exc:
            raise RetrieverError(self.name, f"cannot index: {exc}") from None
        index = self._writable()
        batches: list[tuple[str | None, list[IndexDoc]]] = []
        for n, path in enumerate(files, 1):
            try:
                batches.append((str(path), load_file(path, self.options.chunk_chars)))
            except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
                report.failed.append((str(path), str(exc)))
            if progress is not None:
                progress(n, len(files))
        report.files = len(batches)
        report.documents = self._write(index, batches)
        report.seconds = time.perf_counter() - started
        return report

    def _write(self, index: tantivy.Index,
               batches: list[tuple[str | None, list[IndexDoc]]]) -> int:
        try:
            writer = index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
        except ValueError as exc:
            raise RetrieverError(
                self.name, f"cannot write the index at {self.options.path} ({exc}); is "
                           f"another `kairox kb index {self.name}` running?") from None
        count = 0
        try:
            for path, docs in batches:
                if path is not None:  # re-indexing a file replaces all it gave before
                    writer.delete_documents_by_term("path", path)
                for doc in docs:
                    writer.delete_documents_by_term("key", doc.key)
                    writer.add_document(self._document(doc))
                    count += 1
            writer.commit()
            writer.wait_merging_threads()
        except BaseException:
            writer.rollback()
            raise
        index.reload()
        return count

    def _document(self, doc: IndexDoc) -> tantivy.Document:
        out = tantivy.Document()
        out.add_text("key", doc.key)
        out.add_text("doc_id", doc.doc_id)
        if doc.chunk_id:
            out.add_text("chunk_id", doc.chunk_id)
        if doc.path:
            out.add_text("path", doc.path)
        out.add_text("title", doc.title)
        out.add_text("body", doc.text)
        out.add_json("meta", dict(doc.metadata))
        for name in self.options.stored_fields:
            value = doc.metadata.get(name)
            for item in value if isinstance(value, list) else [value]:
                if item is not None:
                    out.add_text(name, str(item))
        return out


def make_retriever(kb: KnowledgeBaseConfig) -> TantivyRetriever:
    """The registered factory: validates options now, opens the index on first use."""
    return TantivyRetriever(kb)
