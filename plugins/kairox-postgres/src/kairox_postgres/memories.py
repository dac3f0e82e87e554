"""``PgMemoryStore``: accepted memories and their history, on PostgreSQL.

The same tables and semantics as ``SqliteMemoryStore`` (kairox_core/store/memory_store.py);
what SQLite gets from ``BEGIN IMMEDIATE`` (one writer at a time) comes here from a
transaction-level advisory lock on the (scope, owner, key) being written, so two hosts
writing one key serialise and neither fails on the unique index.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable

from kairox_core.markers import MemoryScope
from kairox_core.memory.records import (
    MemoryNotFoundError,
    MemoryRecord,
    MemoryVersion,
    Provenance,
    new_id,
    owner_of,
    parse_scope,
)
from kairox_core.store.memory_rows import (
    COLUMNS,
    HISTORY_COLUMNS,
    PutRequest,
    approved_at,
    archived_values,
    check_body,
    list_filter,
    record_from_row,
    versions,
)
from kairox_postgres.db import PgDatabase

# A version archived by the same statement that changes the row (one round trip).
_ARCHIVE = f"INSERT INTO memory_history ({HISTORY_COLUMNS}) VALUES ({', '.join(['%s'] * 12)})"


class PgMemoryStore:
    """The ``MemoryStore`` of the ``postgresql`` storage (shares its transactions)."""

    def __init__(self, db: PgDatabase, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def close(self) -> None:
        """Nothing of its own to release: the storage closes the pool."""

    def __enter__(self) -> PgMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writes ----------------------------------------------------------------------

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
        req = PutRequest.of(
            scope,
            key,
            body,
            workspace_id=workspace_id,
            session_id=session_id,
            provenance=provenance,
        )
        with self.db.atomic() as conn:
            now = self.clock()
            row = None
            if req.key is not None:
                # two statements: under READ COMMITTED the read's snapshot must be taken
                # after the lock is held, or it would miss the previous holder's insert
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (req.lock_name,)
                )
                row = conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE scope = %s AND owner = %s AND key = %s",
                    (req.scope.value, req.owner, req.key),
                ).fetchone()
            if row is None:
                memory_id = new_id("m")
                conn.execute(
                    f"INSERT INTO memories ({COLUMNS}) VALUES ({', '.join(['%s'] * 13)})",
                    req.insert_values(memory_id, now),
                )
                return req.inserted(memory_id, now)
            if row["body"] == req.body:
                return record_from_row(row)
            prov = req.provenance
            conn.execute(
                f"WITH archived AS ({_ARCHIVE}) "
                "UPDATE memories SET body = %s, updated_at = %s, approved_at = %s, "
                "prov_session_id = %s, prov_turn_id = %s, prov_raw = %s WHERE id = %s",
                (
                    *archived_values(row, now, "replaced"),
                    req.body,
                    now,
                    approved_at(req.scope, now),
                    prov.session_id,
                    prov.turn_id,
                    prov.raw,
                    row["id"],
                ),
            )
            return req.replaced(row, now)

    def update_body(self, memory_id: str, body: str) -> MemoryRecord:
        check_body(body)
        with self.db.atomic() as conn:
            row = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE id = %s FOR UPDATE", (memory_id,)
            ).fetchone()
            if row is None:
                raise MemoryNotFoundError(f"no memory with id '{memory_id}'")
            if row["body"] == body:
                return record_from_row(row)
            now = self.clock()
            updated = conn.execute(
                f"WITH archived AS ({_ARCHIVE}) "
                "UPDATE memories SET body = %s, updated_at = %s, approved_at = %s WHERE id = %s "
                f"RETURNING {COLUMNS}",
                (
                    *archived_values(row, now, "edited"),
                    body,
                    now,
                    approved_at(row["scope"], now),
                    memory_id,
                ),
            ).fetchone()
            return record_from_row(updated)

    def delete(self, memory_id: str) -> bool:
        with self.db.atomic() as conn:
            row = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE id = %s FOR UPDATE", (memory_id,)
            ).fetchone()
            if row is None:
                return False
            conn.execute(
                f"WITH archived AS ({_ARCHIVE}) DELETE FROM memories WHERE id = %s",
                (*archived_values(row, self.clock(), "deleted"), memory_id),
            )
            return True

    def archive_session(self, session_id: str) -> int:
        with self.db.atomic() as conn:
            cur = conn.execute(
                "DELETE FROM memories WHERE scope = 'session' AND owner = %s", (session_id,)
            )
            conn.execute(
                "DELETE FROM memory_history WHERE scope = 'session' AND owner = %s", (session_id,)
            )
            return int(cur.rowcount)

    # --- reads -----------------------------------------------------------------------

    def get(
        self,
        scope: MemoryScope | str,
        key: str,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> MemoryRecord | None:
        scope = parse_scope(scope)
        owner = owner_of(scope, workspace_id=workspace_id, session_id=session_id)
        with self.db.connection() as conn:
            row = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE scope = %s AND owner = %s AND key = %s",
                (scope.value, owner, key),
            ).fetchone()
        return record_from_row(row) if row is not None else None

    def get_by_id(self, memory_id: str) -> MemoryRecord | None:
        with self.db.connection() as conn:
            row = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE id = %s", (memory_id,)
            ).fetchone()
        return record_from_row(row) if row is not None else None

    def list(
        self,
        scope: MemoryScope | str | None = None,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> list[MemoryRecord]:
        where, params = list_filter(
            scope, workspace_id=workspace_id, session_id=session_id, mark="%s"
        )
        sql = f"SELECT {COLUMNS} FROM memories WHERE {where} ORDER BY updated_at DESC, n DESC"
        with self.db.connection() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [record_from_row(row) for row in rows]

    def history(
        self,
        scope: MemoryScope | str,
        key: str,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> builtins.list[MemoryVersion]:
        scope = parse_scope(scope)
        owner = owner_of(scope, workspace_id=workspace_id, session_id=session_id)
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT * FROM memory_history WHERE scope = %s AND owner = %s AND key = %s "
                "ORDER BY id",
                (scope.value, owner, key),
            ).fetchall()
            current = conn.execute(
                f"SELECT {COLUMNS} FROM memories WHERE scope = %s AND owner = %s AND key = %s",
                (scope.value, owner, key),
            ).fetchone()
        return versions(scope, rows, current)


__all__ = ["PgMemoryStore"]
