"""The retrieval interfaces every index, knowledge base and embedding backend speaks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.errors import KairoxError


@dataclass(frozen=True)
class RetrievalHit:
    """One retrieved passage. ``source`` names the index or knowledge base it came from."""

    text: str
    score: float
    source: str
    doc_id: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    chunk_id: str | None = None


@runtime_checkable
class EmbeddingBackend(Protocol):
    """Turns text into fixed-size vectors. Implementations batch internally."""

    name: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


class SearchableIndex(Protocol):
    """What ``WorkspaceIndexRetriever`` needs of an index (every ``WorkspaceIndex`` of
    store/protocol.py has it): declared here so the retrieval layer never names the
    storage protocol above it."""

    def search(
        self, query: str, k: int = 8, mode: str = "hybrid", filters: Any = None
    ) -> list[RetrievalHit]: ...

    def close(self) -> None: ...


@runtime_checkable
class WorkspaceRetriever(Protocol):
    """A source of hits: the workspace index or one configured knowledge base.

    ``filters`` maps metadata field names to a required value (or a list of allowed
    values); a retriever that cannot apply a filter raises ``RetrieverError``.
    """

    name: str

    @property
    def capabilities(self) -> RetrieverCapabilities:
        """What it supports beyond this protocol (``index_files``: an
        ``IndexableRetriever``)."""
        ...

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]: ...

    async def close(self) -> None: ...


@runtime_checkable
class Reranker(Protocol):
    """Scores passages against a query; higher is better. Implementations batch."""

    name: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


class RetrieverError(KairoxError):
    """A retriever failed. The message names the knowledge base and the cause."""

    def __init__(self, source: str, cause: str) -> None:
        self.source = source
        self.cause = cause
        super().__init__(f"knowledge base '{source}': {cause}")


class RetrieverUnavailable(RetrieverError):
    """The service could not be reached."""


class RetrieverAuthError(RetrieverError):
    """The service refused the credentials."""


class RetrieverTimeout(RetrieverError):
    """The service did not answer in time."""


class RetrieverConfigError(RetrieverError):
    """The knowledge base's configuration cannot work (missing key, unknown index...)."""


@dataclass
class IndexReport:
    """What building or refreshing an index did (``kairox index`` / ``kairox kb index``)."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks: int = 0  # chunks (or documents, for engines without chunking) written
    skipped_binary: int = 0
    skipped_large: int = 0
    errors: list[str] = field(default_factory=list)  # "path: what went wrong", one per file
    seconds: float = 0.0
    skipped_outside: list[str] = field(default_factory=list)  # links out of the folder

    def as_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "chunks": self.chunks,
            "skipped_binary": self.skipped_binary,
            "skipped_large": self.skipped_large,
            "errors": list(self.errors),
            "skipped_outside": list(self.skipped_outside),
            "seconds": round(self.seconds, 3),
        }


class IndexProgress(Protocol):
    """Progress callback: ``progress(done, total, current_item)``; total may be None."""

    def __call__(self, done: int, total: int | None, item: str) -> None: ...


@runtime_checkable
class IndexableRetriever(Protocol):
    """A knowledge base that can build its own index from files: ``kairox kb index``.

    ``index`` walks ``paths`` (files or folders), adds new files, re-indexes changed
    ones, removes ones gone since the last run, and reports; a file that cannot be
    read is listed in ``IndexReport.errors`` and never stops the run.
    """

    name: str

    def index(
        self, paths: Sequence[str], *, progress: IndexProgress | None = None
    ) -> IndexReport: ...


def indexable(retriever: WorkspaceRetriever) -> IndexableRetriever | None:
    """``retriever`` as an ``IndexableRetriever`` when it declares ``index_files``."""
    return cast(IndexableRetriever, retriever) if retriever.capabilities.index_files else None
