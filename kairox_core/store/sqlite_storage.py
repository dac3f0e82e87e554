"""The built-in ``sqlite`` storage: one SQLite file holds everything.

Events, memories, proposals, long-term chunks, personal packs and the retrieval index
share one ``Database`` (one connection, one lock), so an approval's memory write,
proposal row and events commit in one transaction and the index is read with the same
connection a turn writes with.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from kairox_core.capabilities import StorageCapabilities
from kairox_core.store.database import Database, DatabaseStore
from kairox_core.store.event_store import EventStore
from kairox_core.store.memory_store import SqliteMemoryStore
from kairox_core.store.proposal_store import SqliteProposalStore
from kairox_core.store.sql.leases import SqlLeaseStore

if TYPE_CHECKING:
    from kairox_core.config import KairoxConfig
    from kairox_core.longterm.sqlite_store import SqliteLongTermStore
    from kairox_core.retrieval.base import EmbeddingBackend
    from kairox_core.retrieval.index import WorkspaceRagIndex


LEASES_COMPONENT = "leases"
LEASES_MIGRATIONS = (
    """
    CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        acquired_at REAL NOT NULL,
        expires_at REAL NOT NULL
    );
    """,
)


class SqliteLeaseStore(DatabaseStore, SqlLeaseStore[Database]):
    """Leases (store/leases.py) in the shared SQLite database: the ``leases`` table and
    the shared SQL store's statements (store/sql/leases.py)."""

    def __init__(
        self,
        path_or_conn: str | os.PathLike[str] | Database | Any,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(path_or_conn, LEASES_COMPONENT, LEASES_MIGRATIONS)
        self.clock = clock


class SqliteStorage:
    """``Storage`` over one SQLite file (or an open ``Database``)."""

    name = "sqlite"

    capabilities = StorageCapabilities(longterm=True)

    def __init__(self, target: str | os.PathLike[str] | Database) -> None:
        if isinstance(target, str) and target.startswith("sqlite:///"):
            target = target.removeprefix("sqlite:///")
        self.db = Database.open(target)
        self.location = self.db.path or ":memory:"
        self._events = EventStore(self.db)
        self._memories = SqliteMemoryStore(self.db)
        self._proposals = SqliteProposalStore(self.db)
        self._leases = SqliteLeaseStore(self.db)
        from kairox_core.longterm.sqlite_store import SqliteLongTermStore  # no import cycle

        self._longterm = SqliteLongTermStore(self.db)  # migrates: outside any transaction
        self._closed = False

    @property
    def events(self) -> EventStore:
        return self._events

    @property
    def memories(self) -> SqliteMemoryStore:
        return self._memories

    @property
    def proposals(self) -> SqliteProposalStore:
        return self._proposals

    @property
    def leases(self) -> SqliteLeaseStore:
        return self._leases

    @property
    def longterm(self) -> SqliteLongTermStore:
        """Long-term chunks and personal packs."""
        return self._longterm

    def atomic(self) -> AbstractContextManager[Any]:
        return self.db.atomic()

    def workspace_index(
        self, config: KairoxConfig, space: str, *, backend: EmbeddingBackend | None = None
    ) -> WorkspaceRagIndex:
        from kairox_core.retrieval.index import WorkspaceRagIndex

        return WorkspaceRagIndex.from_config(config, self.db.conn, space, backend=backend)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._leases.close()
        self._proposals.close()
        self._memories.close()
        self._events.close()
        self.db.release()


def open_sqlite(target: str) -> SqliteStorage:
    """The registered factory: a path (``~`` expanded) or ``sqlite:///path``."""
    if target.startswith("sqlite:///"):
        target = target.removeprefix("sqlite:///")
    return SqliteStorage(os.path.expanduser(target) if target != ":memory:" else target)


__all__ = ["SqliteLeaseStore", "SqliteStorage", "open_sqlite"]
