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
re-exported here so a backend need not import their home modules. The storage
protocols themselves live in ``store/base.py`` (the protocols layer, below the plugin
registry, which types its storage registrar with them).
"""

from __future__ import annotations

from kairox_core.capabilities import (
    IndexCapabilities,
    LongTermCapabilities,
    StorageCapabilities,
)
from kairox_core.longterm.store import (
    Activation,
    Embed,
    LongTermStore,
    PackRow,
    StoredChunk,
    chunk_filters,
)
from kairox_core.longterm.store import Chunk as LongTermChunk
from kairox_core.memory.base import MemoryStore
from kairox_core.memory.records import MemoryRecord, MemoryVersion, Proposal, Provenance
from kairox_core.store.base import (
    Claim,
    EventLog,
    HistoryRow,
    Lease,
    LeaseStore,
    ProposalStore,
    Row,
    SessionInfo,
    Storage,
    WorkspaceIndex,
)

__all__ = [
    "Activation",
    "Claim",
    "Embed",
    "EventLog",
    "HistoryRow",
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
