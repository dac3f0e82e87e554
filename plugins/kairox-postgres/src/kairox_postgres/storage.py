"""The ``postgresql`` storage: events, memories, proposals, leases, long-term chunks and
personal packs on one server.

Many processes on many hosts share it: seqs are assigned under a row lock, decisions
are conditional updates, and one compaction per session runs at a time under the
core's lease (``leases``: a row in ``kairox_leases``), which expires, and which a dead
holder on the same host loses at once, so a crashed holder never blocks the next for
longer than its ttl.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from kairox_core.store.protocol import StorageCapabilities
from kairox_core.store.sql import SqlLeaseStore, SqlMemoryStore, SqlProposalStore
from kairox_postgres.db import PgDatabase
from kairox_postgres.events import PgEventLog
from kairox_postgres.longterm import PgLongTermStore
from kairox_postgres.schema import migrate

if TYPE_CHECKING:
    from kairox_core.store.indexing import EmbeddingBackend
    from kairox_postgres.index import PgWorkspaceIndex

DEFAULT_LEASE_SECONDS = 600.0  # the event store's STALE_RUN_SECONDS: the same patience


class PostgresStorage:
    """``Storage`` over a PostgreSQL database (a ``postgresql://`` URL)."""

    name = "postgresql"

    capabilities = StorageCapabilities(longterm=True, check=True)

    def __init__(self, url: str, *, migrate_schema: bool = True, max_connections: int = 8) -> None:
        self.db = PgDatabase(url, max_size=max_connections)
        self.location = self.db.location
        try:
            if migrate_schema:
                migrate(self.db)
        except BaseException:
            self.db.close()
            raise
        self._events = PgEventLog(self.db)
        self._memories = SqlMemoryStore(self.db)
        self._proposals = SqlProposalStore(self.db)
        self._leases = SqlLeaseStore(self.db)
        self._longterm = PgLongTermStore(self.db)

    @property
    def events(self) -> PgEventLog:
        return self._events

    @property
    def memories(self) -> SqlMemoryStore[PgDatabase]:
        return self._memories

    @property
    def proposals(self) -> SqlProposalStore[PgDatabase]:
        return self._proposals

    @property
    def leases(self) -> SqlLeaseStore[PgDatabase]:
        """The core's lease store (the compactor's one-run-per-session claim)."""
        return self._leases

    @property
    def longterm(self) -> PgLongTermStore:
        """Long-term chunks (pgvector) and personal packs."""
        return self._longterm

    def atomic(self) -> AbstractContextManager[Any]:
        return self.db.atomic()

    def workspace_index(
        self, config: Any, space: str, *, backend: EmbeddingBackend | None = None
    ) -> PgWorkspaceIndex:
        from kairox_postgres.index import PgWorkspaceIndex

        return PgWorkspaceIndex.from_config(config, self.db, space, backend)

    def check(self) -> list[str]:
        """``kairox db check``: the server answers, the schema is this plugin's and the
        vector extension is installed (lines starting ``damaged`` are problems)."""
        from kairox_postgres.schema import COMPONENTS, versions

        lines = []
        server = self.db.execute("SHOW server_version")[0]["server_version"]
        lines.append(f"ok: {self.location}: PostgreSQL {server} answers")
        found = versions(self.db)
        behind = [
            f"{n} {v} of {len(COMPONENTS[n])}" for n, v in found.items() if v != len(COMPONENTS[n])
        ]
        if behind:
            lines.append(
                f"damaged: schema not up to date ({', '.join(behind)}); fix: `kairox db migrate`"
            )
        else:
            lines.append(f"ok: schema up to date ({len(found)} components)")
        vector = self.db.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        if vector:
            lines.append(f"ok: vector extension {vector[0]['extversion']}")
        else:
            lines.append(
                "damaged: the vector extension is not installed; fix: have a "
                "superuser run `CREATE EXTENSION vector;` in this database"
            )
        return lines

    def close(self) -> None:
        self.db.close()


def open_postgres(target: str) -> PostgresStorage:
    """The registered factory: a ``postgresql://`` URL (``$env:NAME`` password allowed)."""
    return PostgresStorage(target)


__all__ = ["PostgresStorage", "open_postgres"]
