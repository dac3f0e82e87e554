"""Accepted memories and their history (the ``MemoryStore`` protocol), once for every SQL
backend.

Tables ``memories`` (the current body per (scope, owner, key)) and ``memory_history``
(every body a key had before). Writers to one key serialise: on SQLite the write
transaction (``BEGIN IMMEDIATE``) holds the file, elsewhere the dialect's ``key_lock``
(a transaction-long lock on the key's name) does, so two hosts writing one key neither
lose a version nor fail on the unique index. Each lookup reads the database afresh (no
cache): a change made by the CLI is visible to a running session at its next turn. The
rules (what a valid write is, who owns it, which values a row keeps) are
``store/memory_rows.py``'s.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable
from typing import Any, Self

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
from kairox_core.store.sql.dialect import DB, SqlStore

_BY_KEY = f"SELECT {COLUMNS} FROM memories WHERE scope = ? AND owner = ? AND key = ?"
_BY_ID = f"SELECT {COLUMNS} FROM memories WHERE id = ?"
_INSERT = f"INSERT INTO memories ({COLUMNS}) VALUES ({', '.join('?' * 13)})"
_ARCHIVE = f"INSERT INTO memory_history ({HISTORY_COLUMNS}) VALUES ({', '.join('?' * 12)})"


class SqlMemoryStore(SqlStore[DB]):
    """The ``MemoryStore`` over a ``SqlDatabase`` (writes nest in its transactions)."""

    def __init__(self, db: DB, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(db)
        self.clock = clock

    def __enter__(self) -> Self:
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
        dialect = self.db.dialect
        with self.db.atomic() as conn:
            now = self.clock()
            row = None
            if req.key is not None:
                if dialect.key_lock is not None:
                    # its own statement: under READ COMMITTED the read's snapshot must be
                    # taken once the lock is held, or it would miss the last holder's insert
                    conn.execute(dialect.sql(dialect.key_lock), (req.lock_name,))
                row = conn.execute(
                    dialect.sql(_BY_KEY), (req.scope.value, req.owner, req.key)
                ).fetchone()
            if row is None:
                memory_id = new_id("m")
                conn.execute(dialect.sql(_INSERT), req.insert_values(memory_id, now))
                return req.inserted(memory_id, now)
            if row["body"] == req.body:
                return record_from_row(row)
            prov = req.provenance
            self._archive_then(
                conn,
                row,
                now,
                "replaced",
                "UPDATE memories SET body = ?, updated_at = ?, approved_at = ?, "
                "prov_session_id = ?, prov_turn_id = ?, prov_raw = ? WHERE id = ?",
                (
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
            row = self._locked(conn, memory_id)
            if row is None:
                raise MemoryNotFoundError(f"no memory with id '{memory_id}'")
            if row["body"] == body:
                return record_from_row(row)
            now = self.clock()
            updated = self._archive_then(
                conn,
                row,
                now,
                "edited",
                "UPDATE memories SET body = ?, updated_at = ?, approved_at = ? WHERE id = ? "
                f"RETURNING {COLUMNS}",
                (body, now, approved_at(row["scope"], now), memory_id),
            ).fetchone()
            return record_from_row(updated)

    def delete(self, memory_id: str) -> bool:
        with self.db.atomic() as conn:
            row = self._locked(conn, memory_id)
            if row is None:
                return False
            delete = "DELETE FROM memories WHERE id = ?"
            self._archive_then(conn, row, self.clock(), "deleted", delete, (memory_id,))
            return True

    def archive_session(self, session_id: str) -> int:
        with self.db.atomic() as conn:
            cur = conn.execute(
                self._sql("DELETE FROM memories WHERE scope = 'session' AND owner = ?"),
                (session_id,),
            )
            conn.execute(
                self._sql("DELETE FROM memory_history WHERE scope = 'session' AND owner = ?"),
                (session_id,),
            )
            return int(cur.rowcount)

    def _locked(self, conn: Any, memory_id: str) -> Any:
        """The row of ``memory_id``, locked for the rest of the transaction (or None)."""
        return conn.execute(self._sql(_BY_ID + self.db.dialect.for_update), (memory_id,)).fetchone()

    def _archive_then(
        self, conn: Any, row: Any, now: float, ended: str, statement: str, params: tuple[Any, ...]
    ) -> Any:
        """Keep ``row``'s body in the history, then run ``statement`` (which changes or
        removes it); one statement where the dialect has writable CTEs. Its cursor."""
        archived = archived_values(row, now, ended)
        if self.db.dialect.writable_cte:
            return conn.execute(
                self._sql(f"WITH archived AS ({_ARCHIVE}) {statement}"), (*archived, *params)
            )
        conn.execute(self._sql(_ARCHIVE), archived)
        return conn.execute(self._sql(statement), params)

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
        with self.db.reading() as conn:
            row = conn.execute(self._sql(_BY_KEY), (scope.value, owner, key)).fetchone()
        return record_from_row(row) if row is not None else None

    def get_by_id(self, memory_id: str) -> MemoryRecord | None:
        with self.db.reading() as conn:
            row = conn.execute(self._sql(_BY_ID), (memory_id,)).fetchone()
        return record_from_row(row) if row is not None else None

    def list(
        self,
        scope: MemoryScope | str | None = None,
        *,
        workspace_id: str | None = None,
        session_id: str | None = None,
    ) -> list[MemoryRecord]:
        where, params = list_filter(
            scope, workspace_id=workspace_id, session_id=session_id, mark="?"
        )
        order = self.db.dialect.row_order
        sql = f"SELECT {COLUMNS} FROM memories WHERE {where} ORDER BY updated_at DESC, {order} DESC"
        with self.db.reading() as conn:
            rows = conn.execute(self._sql(sql), params).fetchall()
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
        with self.db.reading() as conn:
            rows = conn.execute(
                self._sql(
                    "SELECT * FROM memory_history WHERE scope = ? AND owner = ? AND key = ? "
                    "ORDER BY id"
                ),
                (scope.value, owner, key),
            ).fetchall()
            current = conn.execute(self._sql(_BY_KEY), (scope.value, owner, key)).fetchone()
        return versions(scope, rows, current)


__all__ = ["SqlMemoryStore"]
