"""The storage protocol, at the protocols layer: what a storage backend implements.

``Storage`` is one database (the event log, memories, proposals, leases, long-term
chunks and packs, the retrieval index); the values it passes that belong to no other
protocol (``Row``, ``SessionInfo``, ``Lease``, ``Claim``) live here too. It sits below
the plugin registry so ``hookspecs.py`` can type the storage registrar with it; the
public module a backend imports is ``kairox_core.store.protocol``, which re-exports
all of this with the values of the other protocols.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import threading

    from kairox_core.capabilities import IndexCapabilities, StorageCapabilities
    from kairox_core.config.model import KairoxConfig
    from kairox_core.events import Event
    from kairox_core.longterm.store import LongTermStore
    from kairox_core.markers import MemoryScope
    from kairox_core.memory.base import MemoryStore
    from kairox_core.memory.records import Proposal
    from kairox_core.retrieval.base import EmbeddingBackend, RetrievalHit, WorkspaceRetriever
    from kairox_core.retrieval.documents import DocumentInput


# One row of ``EventLog.history_rows`` (``event_rows.HISTORY_COLUMNS``): seq, kind (an
# index into ``HISTORY_KINDS``), turn_id, the stored token count (None: not under the
# scheme asked for), extra (JSON text or None) and the message text.
HistoryRow = tuple[int, int, str | None, int | None, str | None, str]


@dataclass(frozen=True)
class Row:
    """One conversation event, light: enough to plan a compaction, not to summarise."""

    seq: int
    type: str
    turn_id: str
    tokens: int


@dataclass(frozen=True)
class SessionInfo:
    """One row of the session list. ``workspace_id``/``profile`` are None until started."""

    session_id: str
    workspace_id: str | None
    profile: str | None
    created_at: float
    last_seq: int
    event_count: int
    archived_at: float | None = None

    @property
    def archived(self) -> bool:
        return self.archived_at is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "workspace_id": self.workspace_id,
            "profile": self.profile,
            "created_at": self.created_at,
            "last_seq": self.last_seq,
            "event_count": self.event_count,
            "archived": self.archived,
            "archived_at": self.archived_at,
        }


@dataclass(frozen=True)
class Lease:
    """One claim: who holds ``name``, from where, until when."""

    name: str
    holder: str
    pid: int
    host: str
    note: str
    acquired_at: float
    expires_at: float

    def describe(self) -> str:
        """For messages: ``holder c-1 (pid 42 on host h)``."""
        return f"holder {self.holder} (pid {self.pid} on host {self.host})"


@dataclass(frozen=True)
class Claim:
    """What ``acquire`` found: ``lease`` when taken (else None), ``current`` the live
    lease that refused it, ``displaced`` a dead holder's lease it replaced."""

    lease: Lease | None
    current: Lease | None = None
    displaced: Lease | None = None

    @property
    def ok(self) -> bool:
        return self.lease is not None


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
    ) -> list[HistoryRow]: ...
    def compaction_running(self, session_id: str) -> int | None: ...
    def indexed_stretch(self, session_id: str) -> tuple[int, int] | None: ...
    def set_indexed_stretch(self, session_id: str, low: int, last: int) -> None: ...
    def atomic(self) -> AbstractContextManager[object]: ...
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
    def as_retriever(self, name: str = ..., mode: str = ...) -> WorkspaceRetriever: ...
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

    def atomic(self) -> AbstractContextManager[object]:
        """All or nothing across events, memories and proposals; nests."""
        ...

    def workspace_index(
        self, config: KairoxConfig, space: str, *, backend: EmbeddingBackend | None = None
    ) -> WorkspaceIndex:
        """The retrieval index of one space (a workspace, or a session's recall)."""
        ...

    def close(self) -> None: ...


__all__ = [
    "Claim",
    "EventLog",
    "HistoryRow",
    "Lease",
    "LeaseStore",
    "ProposalStore",
    "Row",
    "SessionInfo",
    "Storage",
    "WorkspaceIndex",
]
