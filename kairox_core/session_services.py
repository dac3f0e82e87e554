"""``SessionServices``: what a ``Session`` (and its turns) use of the ``Kairox`` that made it.

The engine context (storage, configuration, retriever factory) plus the memory side
(the memory store, the approval flow) and the engines the facade built. The facade
builds one and hands it to every session, so a session never names the facade.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kairox_core.config import KairoxConfig
    from kairox_core.engine_context import EngineContext
    from kairox_core.engines import CompactionEngine, Engine, SynopsisWriter
    from kairox_core.memory.approvals import ApprovalService
    from kairox_core.memory.base import MemoryStore
    from kairox_core.retrieval.composite import CompositeWorkspaceRetriever
    from kairox_core.store.protocol import EventLog, Storage


@dataclass(frozen=True, eq=False)
class SessionServices:
    """The narrow dependencies of a session: ``engine_context`` (what its engines got
    too), ``memories`` and ``approvals``, and the engines called at fixed points
    (``compaction_engine``: the one serving ``compact()``, ``synopsis_writer``: the one
    writing attached documents' synopses; either may be None)."""

    engine_context: EngineContext
    memories: MemoryStore
    approvals: ApprovalService
    engines: tuple[Engine, ...] = ()
    compaction_engine: CompactionEngine | None = None
    synopsis_writer: SynopsisWriter | None = None

    @property
    def storage(self) -> Storage:
        return self.engine_context.storage

    @property
    def events(self) -> EventLog:
        return self.engine_context.storage.events

    @property
    def config(self) -> KairoxConfig:
        return self.engine_context.config

    def retriever_for(self, profile: str, workspace_id: str) -> CompositeWorkspaceRetriever:
        return self.engine_context.retriever_for(profile, workspace_id)


__all__ = ["SessionServices"]
