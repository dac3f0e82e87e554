"""The storage protocol: everything Kairox keeps, behind one object a backend implements.

A backend (the built-in ``sqlite``; ``postgresql`` from its plugin) is registered through
``kairox_register_storage(register)`` as ``register(name, factory)`` with
``factory(target: str) -> Storage`` (``target``: a path or a URL). It provides the event
log (append-only, per-session seqs, the queries compaction and recall plan with), the
memory store, the proposals of the approval flow, long-term chunks and personal packs
(``kairox_core.longterm.store.LongTermStore``), the retrieval index and leases (one
process at a time: a compaction), all on one database, plus ``atomic()`` so an
approval's memory write, proposal row and events commit together.
``kairox_core.testing.storage_contract.StorageContract`` is the test class a backend
must pass. Public (the backend API): the protocols and the value types they pass,
re-exported here so a backend need not import their home modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kairox_core.capabilities import (
    IndexCapabilities,
    LongTermCapabilities,
    StorageCapabilities,
)
from kairox_core.events import Event
from kairox_core.longterm.chunks import Chunk as LongTermChunk
from kairox_core.longterm.store import (
    Activation,
    Embed,
    LongTermStore,
    PackRow,
    StoredChunk,
    chunk_filters,
)
from kairox_core.markers import MemoryScope
from kairox_core.memory.base import MemoryStore
from kairox_core.memory.records import MemoryRecord, MemoryVersion, Proposal, Provenance
from kairox_core.store.event_rows import Row, SessionInfo
from kairox_core.store.leases import Claim, Lease

if TYPE_CHECKING:
    import threading

    from kairox_core.retrieval.base import EmbeddingBackend, RetrievalHit
    from kairox_core.retrieval.documents import DocumentInput
    from kairox_core.retrieval.index_search import WorkspaceIndexRetriever


@runtime_checkable
class EventLog(Protocol):
    """The append-only event store (see ``EventStore`` for each method's contract)."""

    def append(self, event: Event) -> Event: ...
    def append_many(self, events: Iterable[Event]) -> list[Event]: ...
    def read(
        self,
        session_id: str,
        *,
        first_seq: int | None = None,
        last_seq: int | None = None,
        types: Iterable[str] | None = None,
    ) -> list[Event]: ...
    def last_seq(self, session_id: str) -> int: ...
    def sessions(
        self, *, workspace_id: str | None = None, include_archived: bool = True
    ) -> list[SessionInfo]: ...
    def get_session(self, session_id: str) -> SessionInfo | None: ...
    def compaction_events(self, session_id: str, after_seq: int = 0) -> list[Event]: ...
    def conversation_rows(
        self,
        session_id: str,
        skip: Sequence[tuple[int, int]] = (),
        *,
        first_seq: int | None = None,
        last_seq: int | None = None,
    ) -> list[Row]: ...
    def conversation_seqs(self, session_id: str, below: int | None, limit: int) -> list[int]: ...
    def history_rows(
        self,
        session_id: str,
        *,
        below: int | None = None,
        above: int | None = None,
        limit: int | None = None,
        counter_key: str | None = None,
    ) -> list[tuple[Any, ...]]: ...
    def compaction_running(self, session_id: str) -> int | None: ...
    def indexed_stretch(self, session_id: str) -> tuple[int, int] | None: ...
    def set_indexed_stretch(self, session_id: str, low: int, last: int) -> None: ...
    def atomic(self) -> AbstractContextManager[Any]: ...
    def close(self) -> None: ...


@runtime_checkable
class ProposalStore(Protocol):
    """Memory proposals (see ``SqliteProposalStore``)."""

    def insert(self, proposal: Proposal, owner: str) -> None: ...
    def supersede(self, proposal_id: str, *, by: str, at: float) -> bool: ...
    def accept(self, proposal_id: str, *, at: float, memory_id: str, final_body: str) -> bool: ...
    def reject(self, proposal_id: str, *, at: float, reason: str | None) -> bool: ...
    def get(self, proposal_id: str) -> Proposal | None: ...
    def pending_for(self, scope: MemoryScope, owner: str, key: str) -> Proposal | None: ...
    def for_turns(self, session_id: str, turn_ids: Sequence[str]) -> list[Proposal]: ...
    def list(
        self,
        *,
        status: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> list[Proposal]: ...
    def close(self) -> None: ...


@runtime_checkable
class LeaseStore(Protocol):
    """Atomic claims (see store/leases.py): one holder per name at a time, a dead
    holder (expired, or its pid gone on this host) displaced by the next ``acquire``.
    Expiry is measured by ``clock`` (``time.time``; a test sets its own)."""

    clock: Callable[[], float]

    def acquire(self, name: str, holder: str, *, ttl: float, note: str = "") -> Claim: ...
    def renew(self, name: str, holder: str, *, ttl: float) -> bool: ...
    def release(self, name: str, holder: str) -> bool: ...
    def get(self, name: str) -> Lease | None: ...


class WorkspaceIndex(Protocol):
    """One space's retrieval index, as the core uses it (``WorkspaceRagIndex`` on SQLite;
    a backend brings its own). ``search`` modes: ``hybrid``, ``vector``, ``keyword``;
    a space embedded with another backend raises ``IndexBackendMismatch`` until
    ``rebuild``. ``lock`` guards the index's connection (re-entrant)."""

    @property
    def capabilities(self) -> IndexCapabilities:
        """What it supports beyond this protocol (term stats, ANN, files...)."""
        ...

    @property
    def lock(self) -> threading.RLock: ...
    def add_documents(
        self, docs: Iterable[DocumentInput], *, batch_size: int = 64
    ) -> list[str]: ...
    def search(
        self, query: str, k: int = 8, mode: str = "hybrid", filters: Any = None
    ) -> list[RetrievalHit]: ...
    def delete_many(self, doc_ids: Iterable[str]) -> int: ...
    def chunk_count(self) -> int: ...
    def rebuild(self) -> int: ...
    def as_retriever(self, name: str = ..., mode: str = ...) -> WorkspaceIndexRetriever: ...
    def close(self) -> None: ...


@runtime_checkable
class Storage(Protocol):
    """One database: events, memories, proposals, long-term chunks and packs, and the
    retrieval index."""

    name: str
    location: str  # for messages: a path, or a URL without its password

    @property
    def capabilities(self) -> StorageCapabilities:
        """What it supports beyond this protocol (``longterm``: a long-term store)."""
        ...

    @property
    def events(self) -> EventLog: ...
    @property
    def memories(self) -> MemoryStore: ...
    @property
    def proposals(self) -> ProposalStore: ...
    @property
    def leases(self) -> LeaseStore: ...
    @property
    def longterm(self) -> LongTermStore:
        """Long-term chunks and personal packs (kairox_core/longterm/store.py); read only
        when ``capabilities.longterm`` is declared."""
        ...

    def atomic(self) -> AbstractContextManager[Any]:
        """All or nothing across events, memories and proposals; nests."""
        ...

    def workspace_index(
        self, config: Any, space: str, *, backend: EmbeddingBackend | None = None
    ) -> WorkspaceIndex:
        """The retrieval index of one space (a workspace, or a session's recall)."""
        ...

    def close(self) -> None: ...


__all__ = [
    "Activation",
    "Claim",
    "Embed",
    "EventLog",
    "IndexCapabilities",
    "Lease",
    "LeaseStore",
    "LongTermCapabilities",
    "LongTermChunk",
    "LongTermStore",
    "MemoryRecord",
    "MemoryStore",
    "MemoryVersion",
    "PackRow",
    "Proposal",
    "ProposalStore",
    "Provenance",
    "Row",
    "SessionInfo",
    "Storage",
    "StorageCapabilities",
    "StoredChunk",
    "WorkspaceIndex",
    "chunk_filters",
]
