"""``EngineContext``: what one ``Kairox`` lends the engines it builds, and nothing more.

An engine factory (``kairox_register_engines``) receives this instead of the whole
``Kairox``: the storage (its event log, leases, index spaces, one transaction across
them), the configuration, the long-term services (``longterm``, ``packs``), a
retriever factory and whether the ``Kairox`` has closed. The facade builds it; nothing
here knows the facade, so an engine depends on the core's seams only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kairox_core.config import KairoxConfig
    from kairox_core.longterm.packs import Packs
    from kairox_core.longterm.service import LongTerm
    from kairox_core.retrieval.composite import CompositeWorkspaceRetriever
    from kairox_core.store.protocol import EventLog, Storage


@dataclass(frozen=True, eq=False)
class EngineContext:
    """The narrow dependencies of an engine (and of the session built beside it).

    ``is_closed`` is asked, not copied: background work (recall's indexing) checks it
    before touching a storage that another loop may have closed meanwhile."""

    storage: Storage
    config: KairoxConfig
    longterm: LongTerm
    packs: Packs
    is_closed: Callable[[], bool] = field(default=lambda: False, repr=False)

    @property
    def events(self) -> EventLog:
        """The event log: every event an engine records goes here."""
        return self.storage.events

    @property
    def closed(self) -> bool:
        return self.is_closed()

    def retriever_for(self, profile: str, workspace_id: str) -> CompositeWorkspaceRetriever:
        """The composite retriever of ``profile`` in ``workspace_id`` (the workspace index
        and the profile's knowledge bases), new for each call."""
        from kairox_core.retrieval.selection import retriever_for_profile

        return retriever_for_profile(self.config, profile, self.storage, workspace_id=workspace_id)


__all__ = ["EngineContext"]
