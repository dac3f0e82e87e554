"""The ``MemoryStore`` protocol: what any memory backend provides.

The built-in backend is ``kairox_core.store.SqliteMemoryStore``; others register a
factory through ``kairox_register_memory_stores`` (``factory(path) -> MemoryStore``).
Every write here is an *accepted* write: the approval flow decides what gets this far.
"""

from __future__ import annotations

import builtins
from typing import Protocol, runtime_checkable

from kairox_core.markers import MemoryScope
from kairox_core.memory.records import MemoryRecord, MemoryVersion, Provenance


@runtime_checkable
class MemoryStore(Protocol):
    """Accepted memories, unique per (scope, owner, key), with their earlier bodies.

    Lookups are always confined to an owner: a workspace lookup needs ``workspace_id``
    and never sees another workspace's records; a session lookup needs ``session_id``.
    """

    def put(
        self,
        scope: MemoryScope | str,
        key: str | None,
        body: str,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
        provenance: Provenance | None = None,
    ) -> MemoryRecord:
        """Accept ``body`` for (scope, owner, key): create it, or replace the body and keep
        the previous one in the history. An unchanged body changes nothing."""
        ...

    def get(
        self,
        scope: MemoryScope | str,
        key: str,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> MemoryRecord | None:
        """The memory with ``key`` in that scope and owner, or None."""
        ...

    def get_by_id(self, memory_id: str) -> MemoryRecord | None: ...

    def list(
        self,
        scope: MemoryScope | str | None = None,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> list[MemoryRecord]:
        """Memories of a scope (None: all scopes), newest first.

        ``workspace_id`` limits workspace memories to that workspace and session memories
        to its sessions; ``session_id`` limits session memories to that session. User
        memories apply everywhere. Without either id, every owner's records are listed
        (the memory browser)."""
        ...

    def history(
        self,
        scope: MemoryScope | str,
        key: str,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> builtins.list[MemoryVersion]:
        """Every body the key has had, oldest first; the current one (if any) last."""
        ...

    def update_body(self, memory_id: str, body: str) -> MemoryRecord:
        """Replace a memory's body by hand (kept in history as ``edited``)."""
        ...

    def delete(self, memory_id: str) -> bool:
        """Remove a memory (its body stays in history); False if there was none."""
        ...

    def archive_session(self, session_id: str) -> int:
        """Discard the session's session-scope memories; returns how many."""
        ...

    def close(self) -> None: ...
